package engine

import (
	"context"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/compactor"
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
