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
	"time"

	gcblob "gocloud.dev/blob"
)

// checkDirPrefix accepts "" or a prefix of valid segments ending in "/".
func checkDirPrefix(prefix string) error {
	if prefix == "" {
		return nil
	}
	if err := checkPrefix(prefix); err != nil {
		return newError("list", prefix, ErrPermanent, err)
	}
	if !strings.HasSuffix(prefix, "/") {
		return newError("list", prefix, ErrPermanent, errors.New("a folder prefix ends in /"))
	}
	return nil
}

// Folders returns the names of the folders directly under prefix (which
// is empty or ends in "/"), sorted: one ListDir request per thousand
// entries of that level.
func Folders(ctx context.Context, b Bucket, prefix string) ([]string, error) {
	var out []string
	token := ""
	for {
		page, err := b.ListDir(ctx, prefix, token, 0)
		if err != nil {
			return nil, err
		}
		for _, f := range page.Folders {
			out = append(out, strings.TrimSuffix(strings.TrimPrefix(f, prefix), "/"))
		}
		if page.Next == "" {
			return out, nil
		}
		token = page.Next
	}
}

func (c *Counted) ListDir(ctx context.Context, prefix, token string, pageSize int) (_ DirPage, err error) {
	c.c.lists.Add(1)
	defer c.timed("list", time.Now(), &err)
	return c.b.ListDir(ctx, prefix, token, pageSize)
}

func (c *cloudBucket) ListDir(ctx context.Context, prefix, token string, pageSize int) (DirPage, error) {
	if err := checkDirPrefix(prefix); err != nil {
		return DirPage{}, err
	}
	if err := ctx.Err(); err != nil {
		return DirPage{}, err
	}
	if pageSize <= 0 {
		pageSize = cloudDefaultPageSize
	}
	tok := gcblob.FirstPageToken
	if token != "" {
		tok = []byte(token)
	}
	objs, next, err := c.b.ListPage(ctx, tok, pageSize, &gcblob.ListOptions{Prefix: prefix, Delimiter: "/"})
	if err != nil {
		return DirPage{}, c.classify("list", prefix, err)
	}
	page := DirPage{Next: string(next)}
	for _, o := range objs {
		if o.IsDir {
			page.Folders = append(page.Folders, o.Key)
		} else {
			page.Objects = append(page.Objects, ObjectInfo{Key: o.Key, Size: o.Size, ModTime: o.ModTime})
		}
	}
	return page, nil
}

// ListDir reads the one folder: its files are the objects, its
// subfolders the folders, in key order (a folder compared as "name/").
// The page token is the last key returned.
func (b *fileBucket) ListDir(ctx context.Context, prefix, token string, pageSize int) (DirPage, error) {
	if err := checkDirPrefix(prefix); err != nil {
		return DirPage{}, err
	}
	if err := ctx.Err(); err != nil {
		return DirPage{}, err
	}
	if pageSize <= 0 {
		pageSize = fileDefaultPageSize
	}
	entries, err := os.ReadDir(filepath.Join(b.root, filepath.FromSlash(prefix)))
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
		return DirPage{}, nil
	}
	if err != nil {
		return DirPage{}, fileErr("list", prefix, err)
	}
	type entry struct {
		key string
		e   os.DirEntry
	}
	es := make([]entry, 0, len(entries))
	for _, e := range entries {
		if prefix == "" && e.Name() == tmpDir {
			continue
		}
		switch {
		case e.IsDir() && CheckKey(prefix+e.Name()+"/x") == nil:
			es = append(es, entry{prefix + e.Name() + "/", e})
		case e.Type().IsRegular() && CheckKey(prefix+e.Name()) == nil:
			es = append(es, entry{prefix + e.Name(), e})
		}
	}
	slices.SortFunc(es, func(a, b entry) int { return strings.Compare(a.key, b.key) })
	var page DirPage
	n := 0
	for _, e := range es {
		if token != "" && e.key <= token {
			continue
		}
		if n == pageSize {
			page.Next = token
			break
		}
		if e.e.IsDir() {
			page.Folders = append(page.Folders, e.key)
		} else {
			fi, err := e.e.Info()
			if err != nil {
				continue // deleted since the folder was read
			}
			page.Objects = append(page.Objects, ObjectInfo{Key: e.key, Size: fi.Size(), ModTime: fi.ModTime()})
		}
		n++
		token = e.key
	}
	return page, nil
}
