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

// Keys of a table's Iceberg view that the server's catalog reads:
// IcebergHintKey, rewritten by every export that writes; IcebergEnginesDir,
// where engines write what they append (layout's).
const (
	IcebergHintKey    = layout.HintKey
	IcebergEnginesDir = layout.EnginesDir
)

// IcebergMetadata is the newest metadata of a table's Iceberg view.
type IcebergMetadata struct {
	N   int    // its number; 0: the table has no view
	Key string // its key under the table's prefix
	Raw []byte // its JSON
}

// NewestIcebergMetadata reads the newest metadata of the table's Iceberg
// view (the hint's, then by name past it).
func NewestIcebergMetadata(ctx context.Context, b blob.Bucket) (IcebergMetadata, error) {
	m, err := layout.Newest(ctx, b)
	if err != nil || m.N == 0 {
		return IcebergMetadata{}, err
	}
	return IcebergMetadata{N: m.N, Key: layout.MetadataKey(m.N), Raw: m.Raw}, nil
}

// IcebergObjectKey is the key, under the table's prefix, of a file the
// view or an engine names by its location; one not under the table's
// location loc is an error.
func IcebergObjectKey(loc, location string) (string, error) { return layout.ObjectKey(loc, location) }
