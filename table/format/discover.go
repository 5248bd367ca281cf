package format

import (
	"context"
	"errors"
	"slices"
	"strings"

	"golang.org/x/sync/errgroup"

	"github.com/stratadb/strata/blob"
)

// Listed is a table found under a root: its name (its folder's path
// under the root; "" for the root itself) and its newest version.
type Listed struct {
	Name    string `json:"name"`
	Version uint64 `json:"version"`
}

// discoverParallelism bounds the folders listed at once.
const discoverParallelism = 32

// ListTables finds every table under root, at any depth, sorted by name
// (see "Where tables may live" in names.go). It walks folders with
// one-level listings (blob.Bucket.ListDir) and never looks inside a
// table's own folders, so its cost does not grow with what tables hold:
// a LIST a folder (a page per thousand entries of that folder) and one
// more for each folder that has a _versions/ folder — two a table.
func ListTables(ctx context.Context, root blob.Bucket) ([]Listed, error) {
	return discover(ctx, root, "")
}

// IsTable reports whether the folder at path under root ("" for root
// itself) is a table: one LIST of one entry, as a rule.
func IsTable(ctx context.Context, root blob.Bucket, path string) (bool, error) {
	dir := strings.Trim(path, "/")
	if dir != "" {
		dir += "/"
	}
	_, err := versionAt(ctx, root, dir)
	if errors.Is(err, ErrNotFound) {
		return false, nil
	}
	return err == nil, err
}

// discover walks the folders from start ("" or ending in "/"), a level
// at a time, listing the folders of a level at once.
func discover(ctx context.Context, root blob.Bucket, start string) ([]Listed, error) {
	found := []Listed{}
	level := []string{start}
	for len(level) > 0 {
		type walked struct {
			version uint64
			sub     []string
		}
		res := make([]walked, len(level))
		g, gctx := errgroup.WithContext(ctx)
		g.SetLimit(discoverParallelism)
		for i, dir := range level {
			g.Go(func() error {
				v, sub, err := walk(gctx, root, dir)
				res[i] = walked{v, sub}
				return err
			})
		}
		if err := g.Wait(); err != nil {
			return nil, err
		}
		var next []string
		for i, r := range res {
			if r.version != 0 {
				found = append(found, Listed{Name: strings.TrimSuffix(level[i], "/"), Version: r.version})
			}
			next = append(next, r.sub...)
		}
		level = next
	}
	slices.SortFunc(found, func(a, b Listed) int { return strings.Compare(a.Name, b.Name) })
	return found, nil
}

// walk lists the folder dir: its newest version if it is a table (else
// 0), and the folders below it that may hold tables — all of them, but a
// table's own.
func walk(ctx context.Context, root blob.Bucket, dir string) (uint64, []string, error) {
	folders, err := blob.Folders(ctx, root, dir)
	if err != nil {
		return 0, nil, err
	}
	var version uint64
	if slices.Contains(folders, strings.TrimSuffix(VersionsDir, "/")) {
		version, err = versionAt(ctx, root, dir)
		if err != nil && !errors.Is(err, ErrNotFound) {
			return 0, nil, err
		}
	}
	var sub []string
	for _, f := range folders {
		if version != 0 && Reserved(f) {
			continue
		}
		sub = append(sub, dir+f+"/")
	}
	return version, sub, nil
}

// versionAt returns the newest version of the table in folder dir ("" or
// ending in "/"), or ErrNotFound. A one-level listing of its _versions/
// comes in key order, and manifest names are digits: the first manifest
// is the newest, and an entry that sorts after every digit (the folders
// of a table named "_versions" kept there, data/, _shards/…) means there
// is none. So one LIST of one entry answers, unless a stray object sorts
// before the manifests.
func versionAt(ctx context.Context, root blob.Bucket, dir string) (uint64, error) {
	prefix := dir + VersionsDir
	token, size := "", 1
	for {
		page, err := root.ListDir(ctx, prefix, token, size)
		if err != nil {
			return 0, err
		}
		keys := slices.Clone(page.Folders)
		for _, o := range page.Objects {
			keys = append(keys, o.Key)
		}
		slices.Sort(keys)
		for _, k := range keys {
			if v, ok := ParseManifestKey(strings.TrimPrefix(k, dir)); ok {
				return v, nil
			}
			if name := strings.TrimPrefix(k, prefix); name != "" && name[0] > '9' {
				return 0, ErrNotFound
			}
		}
		if page.Next == "" {
			return 0, ErrNotFound
		}
		token, size = page.Next, 0
	}
}
