package jobcmd

import (
	"context"
	"time"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/compactor"
	"github.com/stratadb/strata/engine"
	"github.com/stratadb/strata/lakehouse"
)

// IcebergExport is the Job's --iceberg: lakehouse.Export, describing the
// versions the collection keeps. strata-compactor links the Iceberg
// writer; the engine and the strata command do not (see package
// lakehouse/layout).
func IcebergExport(ctx context.Context, b blob.Bucket, loc string, gc compactor.GCPolicy, now time.Time) (engine.IcebergOutcome, error) {
	res, err := lakehouse.Export(ctx, b, &lakehouse.Options{Location: loc, KeepVersions: gc.KeepVersions, RetainFor: gc.RetainFor}, now)
	if err != nil {
		return engine.IcebergOutcome{}, err
	}
	return engine.IcebergOutcome{MetadataLocation: res.MetadataLocation, Written: res.Written, Current: res.Current,
		Snapshots: len(res.Snapshots), Added: len(res.Added), Dropped: len(res.Dropped)}, nil
}
