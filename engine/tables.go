package engine

import (
	"context"
	"time"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/compactor"
	"github.com/stratadb/strata/lakehouse"
	"github.com/stratadb/strata/lakehouse/layout"
)

// DiscoverTables lists the URLs of the tables at any depth under the
// bucket URL root (compactor.DiscoverTables), opening buckets with open.
func DiscoverTables(ctx context.Context, open func(context.Context, string) (blob.Bucket, error), root string) ([]string, error) {
	return compactor.DiscoverTables(ctx, open, root)
}

// IcebergLocation is the address Iceberg readers know a table's URL by
// (s3://bucket/prefix, file:///abs/path).
func IcebergLocation(url string) (string, error) { return layout.LocationOf(url) }

// ExportIceberg writes the Iceberg view of the table in b
// (lakehouse.Export): only what changed since the previous export.
func ExportIceberg(ctx context.Context, b blob.Bucket, o *IcebergOptions, now time.Time) (IcebergResult, error) {
	return lakehouse.Export(ctx, b, o, now)
}

// ExportKept is the Job's IcebergExport: the view at loc of the versions
// the collection by gc keeps.
func ExportKept(ctx context.Context, b blob.Bucket, loc string, gc GCPolicy, now time.Time) (IcebergOutcome, error) {
	res, err := lakehouse.Export(ctx, b, &lakehouse.Options{Location: loc, KeepVersions: gc.KeepVersions, RetainFor: gc.RetainFor}, now)
	if err != nil {
		return IcebergOutcome{}, err
	}
	return IcebergOutcome{MetadataLocation: res.MetadataLocation, Written: res.Written, Current: res.Current,
		Snapshots: len(res.Snapshots), Added: len(res.Added), Dropped: len(res.Dropped)}, nil
}
