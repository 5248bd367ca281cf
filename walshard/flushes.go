package walshard

import (
	"context"
	"time"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/table"
)

// Flush objects as fleet merges find, read and delete them.

// listedFlush is one flush object a listing found.
type listedFlush struct {
	key     string
	seq     uint64
	modTime time.Time
	size    int64 // as listed
}

// listFlushes lists every shard's flush objects, newest first: one LIST
// page per thousand objects (each shard's newest, those awaiting a merge,
// and those merged within flushKeep).
func listFlushes(ctx context.Context, b blob.Bucket) (map[string][]listedFlush, error) {
	out := map[string][]listedFlush{}
	for o, err := range blob.List(ctx, b, table.FleetFlushDir, 0) {
		if err != nil {
			return nil, err
		}
		shard, seq, ok := table.ParseFlushKey(o.Key)
		if !ok {
			continue
		}
		out[shard] = append(out[shard], listedFlush{key: o.Key, seq: seq, modTime: o.ModTime, size: o.Size})
	}
	return out, nil
}

// flushKeep: a flush object all of whose generations are merged is
// deleted once this old (the store's clock), so that a fresh read that
// read an older version of the table and the state that lists it still
// finds it.
const flushKeep = time.Minute

// mergedFlushes returns the listed flush objects at or below the
// sequence number latest records for their shard (ShardMark.Seq: every
// generation they hold is merged, by copy), at least flushKeep old, but
// each shard's newest: those to delete.
func mergedFlushes(flushes map[string][]listedFlush, latest *table.Manifest, now time.Time) []string {
	var doomed []string
	for shard, fl := range flushes {
		mark := latest.Shards[shard]
		for _, f := range fl[1:] {
			if f.seq <= mark.Seq && now.Sub(f.modTime) >= flushKeep {
				doomed = append(doomed, f.key)
			}
		}
	}
	return doomed
}
