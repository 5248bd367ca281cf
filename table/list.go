package table

import (
	"context"
	"strings"

	"golang.org/x/sync/errgroup"

	"github.com/stratadb/strata/blob"
)

// Listed is a table found under a bucket: its name (the folder) and its
// newest version.
type Listed struct {
	Name    string `json:"name"`
	Version uint64 `json:"version"`
}

// ListTables finds the tables directly under root: every folder that holds
// a version. It costs a LIST of the folders (one per thousand) and one
// LIST of one key per folder.
func ListTables(ctx context.Context, root blob.Bucket) ([]Listed, error) {
	names, err := blob.Folders(ctx, root, "")
	if err != nil {
		return nil, err
	}
	found := make([]Listed, len(names))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(32)
	for i, name := range names {
		if strings.HasPrefix(name, "_") || strings.HasPrefix(name, ".") {
			continue // a table's own objects (the root is a table), not a table
		}
		g.Go(func() error {
			dir := name + "/" + VersionsDir
			page, err := root.ListPage(gctx, dir, "", 1)
			if err != nil {
				return err
			}
			for _, o := range page.Objects {
				if v, ok := ParseManifestKey(strings.TrimPrefix(o.Key, name+"/")); ok {
					found[i] = Listed{Name: name, Version: v}
				}
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	out := []Listed{}
	for _, l := range found {
		if l.Version != 0 {
			out = append(out, l)
		}
	}
	return out, nil
}
