// Package iceberg is the engine's Iceberg view, in a package of its own so
// that only the programs that write the view link the Iceberg writer
// (strata-compactor, whose Job keeps each table's view up to date, and
// strata-iceberg, behind `strata export iceberg`): its libraries cost
// every program that links them about 200 ms and 30 MB at start-up
// (harness/houserules/links_test.go keeps them out of strata).
package iceberg

import (
	"context"
	"time"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/engine"
	"github.com/stratadb/strata/lakehouse"
)

// Options and Result are the export's (package lakehouse).
type (
	Options = lakehouse.Options
	Result  = lakehouse.Result
)

// Export writes the Iceberg view of the table in b (lakehouse.Export):
// only what changed since the previous export.
func Export(ctx context.Context, b blob.Bucket, o *Options, now time.Time) (Result, error) {
	return lakehouse.Export(ctx, b, o, now)
}

// ExportKept is the Job's engine.IcebergExport: the view at loc of the
// versions the collection by gc keeps.
func ExportKept(ctx context.Context, b blob.Bucket, loc string, gc engine.GCPolicy, now time.Time) (engine.IcebergOutcome, error) {
	res, err := lakehouse.Export(ctx, b, &lakehouse.Options{Location: loc, KeepVersions: gc.KeepVersions, RetainFor: gc.RetainFor}, now)
	if err != nil {
		return engine.IcebergOutcome{}, err
	}
	return engine.IcebergOutcome{MetadataLocation: res.MetadataLocation, Written: res.Written, Current: res.Current,
		Snapshots: len(res.Snapshots), Added: len(res.Added), Dropped: len(res.Dropped)}, nil
}

// ForCatalog is the in-process exporter of the server's Iceberg catalog
// (server.IcebergExport): the view at the location readers name the table
// at url by, of the versions the collection by gc keeps.
func ForCatalog(ctx context.Context, b blob.Bucket, url string, gc engine.GCPolicy) error {
	loc, err := engine.IcebergLocation(url)
	if err != nil {
		return err
	}
	_, err = ExportKept(ctx, b, loc, gc, time.Now())
	return err
}
