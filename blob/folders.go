package blob

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	gcblob "gocloud.dev/blob"
)

// folderLister is implemented by buckets that list the folders under a
// prefix without listing every key below them (a delimiter LIST, a
// directory read).
type folderLister interface {
	listFolders(ctx context.Context, prefix string) ([]string, error)
}

// Folders returns the names of the folders directly under prefix (which
// is empty or ends in "/"): the distinct next segments of the keys below
// it that go on past a "/", sorted. Buckets that can make it one request
// per thousand folders; others list every key under prefix. A local
// folder's bucket may name a folder that holds nothing any more.
func Folders(ctx context.Context, b Bucket, prefix string) ([]string, error) {
	if prefix != "" {
		if err := checkPrefix(prefix); err != nil {
			return nil, newError("list", prefix, ErrPermanent, err)
		}
		if !strings.HasSuffix(prefix, "/") {
			return nil, newError("list", prefix, ErrPermanent, errors.New("a folder prefix ends in /"))
		}
	}
	if fl, ok := b.(folderLister); ok {
		return fl.listFolders(ctx, prefix)
	}
	seen := map[string]bool{}
	var out []string
	for o, err := range List(ctx, b, prefix, 0) {
		if err != nil {
			return nil, err
		}
		name, _, deeper := strings.Cut(strings.TrimPrefix(o.Key, prefix), "/")
		if deeper && !seen[name] {
			seen[name] = true
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out, nil
}

func (c *Counted) listFolders(ctx context.Context, prefix string) ([]string, error) {
	c.c.lists.Add(1)
	return Folders(ctx, c.b, prefix)
}

func (c *cloudBucket) listFolders(ctx context.Context, prefix string) ([]string, error) {
	var out []string
	tok := gcblob.FirstPageToken
	for {
		objs, next, err := c.b.ListPage(ctx, tok, 1000, &gcblob.ListOptions{Prefix: prefix, Delimiter: "/"})
		if err != nil {
			return nil, c.classify("list", prefix, err)
		}
		for _, o := range objs {
			if o.IsDir {
				out = append(out, strings.TrimSuffix(strings.TrimPrefix(o.Key, prefix), "/"))
			}
		}
		if len(next) == 0 {
			break
		}
		tok = next
	}
	slices.Sort(out)
	return out, nil
}

func (b *fileBucket) listFolders(ctx context.Context, prefix string) ([]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	entries, err := os.ReadDir(filepath.Join(b.root, filepath.FromSlash(prefix)))
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
		return nil, nil
	}
	if err != nil {
		return nil, fileErr("list", prefix, err)
	}
	var out []string
	for _, e := range entries {
		if e.IsDir() && !(prefix == "" && e.Name() == tmpDir) && CheckKey(prefix+e.Name()+"/x") == nil {
			out = append(out, e.Name())
		}
	}
	return out, nil
}
