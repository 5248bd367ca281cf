package compactor

import (
	"context"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/table/format"
)

// DiscoverTables finds the tables under a bucket URL, at any depth, and
// returns their URLs (the root's own when it is a table): the walk of
// format.ListTables, a LIST a folder, never a listing of what the tables
// hold.
func DiscoverTables(ctx context.Context, open func(context.Context, string) (blob.Bucket, error), root string) ([]string, error) {
	b, err := open(ctx, root)
	if err != nil {
		return nil, err
	}
	defer b.Close()
	found, err := format.ListTables(ctx, b)
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(found))
	for _, t := range found {
		out = append(out, blob.JoinURL(root, t.Name))
	}
	return out, nil
}
