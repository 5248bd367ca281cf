package compactor

import (
	"context"
	"errors"

	"github.com/stratadb/strata/blob"
)

// deleteDoomed deletes what a collection found unreferenced, recording it
// in res as it goes. Objects of live shards and of the table may go in any
// order, many a request; a retired shard's go one at a time, in
// retiredLast's order, after them.
func deleteDoomed(ctx context.Context, b blob.Bucket, doomed []blob.ObjectInfo, retiredShards []string, res *GCResult) error {
	var batch []string
	var retired []blob.ObjectInfo
	for _, o := range doomed {
		if retiredShard(o.Key, retiredShards) {
			retired = append(retired, o)
			continue
		}
		batch = append(batch, o.Key)
		res.BytesFreed += o.Size
	}
	res.ObjectsDeleted = append(res.ObjectsDeleted, batch...)
	if err := blob.DeleteAll(ctx, b, batch); err != nil {
		return err
	}
	for _, o := range retired {
		res.ObjectsDeleted = append(res.ObjectsDeleted, o.Key)
		res.BytesFreed += o.Size
		if err := b.Delete(ctx, o.Key); err != nil && !errors.Is(err, blob.ErrNotFound) {
			return err
		}
	}
	return nil
}
