package compactor

import (
	"context"
	"strings"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/table"
)

// DiscoverTables finds the tables under a bucket URL, at any depth, and
// returns their URLs (the root's own when it is a table): the walk of
// table.ListTables, a LIST a folder, never a listing of what the tables
// hold.
func DiscoverTables(ctx context.Context, open func(context.Context, string) (blob.Bucket, error), root string) ([]string, error) {
	b, err := open(ctx, root)
	if err != nil {
		return nil, err
	}
	defer b.Close()
	found, err := table.ListTables(ctx, b)
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(found))
	for _, t := range found {
		out = append(out, joinURL(root, t.Name))
	}
	return out, nil
}

// joinURL appends a path to a bucket URL, before any query.
func joinURL(root, sub string) string {
	if sub == "" {
		return root
	}
	base, query, _ := strings.Cut(root, "?")
	u := strings.TrimSuffix(base, "/") + "/" + sub
	if query != "" {
		u += "?" + query
	}
	return u
}
