package blob

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
)

// tmpDir is the folder, under the bucket's root, where objects are written
// before they are linked or renamed into place. It sits on the same file
// system as the objects (link(2) and rename(2) need that) and is never
// listed: its name is not a valid key segment for Strata's layouts.
const tmpDir = ".strata-tmp"

const fileDefaultPageSize = 1000

// fileBucket keeps objects as files under a root folder.
//
// PutIfAbsent writes a temporary file, fsyncs it, then link(2)s it to the
// final name: link fails with EEXIST atomically, across processes, so
// exactly one of any number of racing creators wins. The folder is fsynced
// afterwards so the new name survives a crash. Readers never see a partial
// object, because the name appears only once the content is complete.
type fileBucket struct {
	root    string
	hasTmp  atomic.Bool  // the temp folder exists
	sweptAt atomic.Int64 // when stale temporary files were last removed (Unix ns)
}

// StaleTempAge: a temporary file this old belongs to a process that died
// between writing it and linking it into place (which takes seconds); it
// is removed when the bucket is opened.
const StaleTempAge = time.Hour

// OpenFile opens a bucket in the folder dir. Nothing is created until
// something is written (the folder, then, if it is missing), so reading a
// table that is not there leaves no trace. Temporary files that dead
// processes left behind (older than StaleTempAge) are removed, then and
// every StaleTempAge while the bucket is written to.
func OpenFile(dir string) (Bucket, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, newError("open", dir, ErrPermanent, err)
	}
	if fi, err := os.Stat(abs); err == nil && !fi.IsDir() {
		return nil, newError("open", dir, ErrBadURL, fmt.Errorf("%s is not a folder", abs))
	}
	b := &fileBucket{root: abs}
	b.removeStaleTemp(time.Now())
	return b, nil
}

// removeStaleTemp deletes temporary files older than StaleTempAge (best
// effort: another process may be removing them too). It runs when the
// bucket is opened and, in a process that keeps it open (a server, the
// Job in interval mode), on a write at most once per StaleTempAge.
func (b *fileBucket) removeStaleTemp(now time.Time) {
	b.sweptAt.Store(now.UnixNano())
	entries, err := os.ReadDir(filepath.Join(b.root, tmpDir))
	if err != nil {
		return
	}
	for _, e := range entries {
		if fi, err := e.Info(); err == nil && fi.Mode().IsRegular() && now.Sub(fi.ModTime()) > StaleTempAge {
			_ = os.Remove(filepath.Join(b.root, tmpDir, e.Name()))
		}
	}
}

func (b *fileBucket) path(op, key string) (string, error) {
	if err := CheckKey(key); err != nil {
		return "", newError(op, key, ErrPermanent, err)
	}
	if key == tmpDir || strings.HasPrefix(key, tmpDir+"/") {
		return "", newError(op, key, ErrPermanent, errBadKey)
	}
	return filepath.Join(b.root, filepath.FromSlash(key)), nil
}

func fileErr(op, key string, err error) error {
	switch {
	case errors.Is(err, fs.ErrNotExist), errors.Is(err, syscall.ENOTDIR), errors.Is(err, syscall.EISDIR):
		return newError(op, key, ErrNotFound, err)
	case errors.Is(err, fs.ErrExist):
		return newError(op, key, ErrExists, err)
	case errors.Is(err, syscall.EINTR), errors.Is(err, syscall.EAGAIN), errors.Is(err, syscall.EMFILE), errors.Is(err, syscall.ENFILE):
		return newError(op, key, ErrRetryable, err)
	default:
		return newError(op, key, ErrPermanent, err)
	}
}

func (b *fileBucket) Get(ctx context.Context, key string) ([]byte, error) {
	p, err := b.path("get", key)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	data, err := os.ReadFile(p)
	if err != nil {
		return nil, fileErr("get", key, err)
	}
	return data, nil
}

func (b *fileBucket) NewRangeReader(ctx context.Context, key string, offset, length int64) (io.ReadCloser, error) {
	p, err := b.path("range-get", key)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	f, err := os.Open(p)
	if err != nil {
		return nil, fileErr("range-get", key, err)
	}
	fi, err := f.Stat()
	if err != nil || fi.IsDir() {
		f.Close()
		if err == nil {
			err = syscall.EISDIR
		}
		return nil, fileErr("range-get", key, err)
	}
	if length < 0 {
		length = 1<<63 - 1 - offset
	}
	return &sectionCloser{Reader: io.NewSectionReader(f, offset, length), f: f, size: fi.Size()}, nil
}

type sectionCloser struct {
	io.Reader
	f    *os.File
	size int64
}

func (s *sectionCloser) Close() error { return s.f.Close() }

// Size is the whole file's size when the range was opened.
func (s *sectionCloser) Size() int64 { return s.size }

// writeTemp writes r to a fresh temporary file, fsyncs it and returns its
// path and size.
func (b *fileBucket) writeTemp(op, key string, r io.Reader) (string, error) {
	if !b.hasTmp.Load() {
		if err := os.MkdirAll(filepath.Join(b.root, tmpDir), 0o755); err != nil {
			return "", fileErr(op, key, err)
		}
		b.hasTmp.Store(true)
	}
	if now := time.Now(); now.UnixNano()-b.sweptAt.Load() > int64(StaleTempAge) {
		b.removeStaleTemp(now)
	}
	var rnd [12]byte
	_, _ = rand.Read(rnd[:])
	tmp := filepath.Join(b.root, tmpDir, hex.EncodeToString(rnd[:]))
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return "", fileErr(op, key, err)
	}
	_, err = io.Copy(f, r)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(tmp)
		return "", fileErr(op, key, err)
	}
	return tmp, nil
}

func (b *fileBucket) mkdirFor(op, key, p string) error {
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return fileErr(op, key, err)
	}
	return nil
}

func (b *fileBucket) PutIfAbsent(ctx context.Context, key string, data []byte) error {
	p, err := b.path("put-if-absent", key)
	if err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	// A name taken already fails at once, before the content is written
	// and synced: a writer that lost a race learns it without queueing a
	// sync behind the winner's (a name once taken stays taken, so the
	// answer is the one the link would give).
	if _, err := os.Lstat(p); err == nil {
		return fileErr("put-if-absent", key, &fs.PathError{Op: "create", Path: p, Err: fs.ErrExist})
	}
	if err := b.mkdirFor("put-if-absent", key, p); err != nil {
		return err
	}
	tmp, err := b.writeTemp("put-if-absent", key, bytes.NewReader(data))
	if err != nil {
		return err
	}
	defer os.Remove(tmp)
	// The point of no return: link either creates the name, atomically and
	// with the complete content, or fails because the name exists.
	if err := os.Link(tmp, p); err != nil {
		return fileErr("put-if-absent", key, err)
	}
	if err := syncDir("put-if-absent", key, filepath.Dir(p)); err != nil {
		// The name is taken, by us, and others may read it already: not a
		// refusal. The caller reads what is there, as after a lost answer.
		return newError("put-if-absent", key, ErrRetryable, fmt.Errorf("created, but its folder did not sync: %w", err))
	}
	return nil
}

func (b *fileBucket) Put(ctx context.Context, key string, r io.Reader) error {
	p, err := b.path("put", key)
	if err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := b.mkdirFor("put", key, p); err != nil {
		return err
	}
	tmp, err := b.writeTemp("put", key, r)
	if err != nil {
		return err
	}
	if err := os.Rename(tmp, p); err != nil {
		os.Remove(tmp)
		return fileErr("put", key, err)
	}
	return syncDir("put", key, filepath.Dir(p))
}

// syncDir fsyncs a folder, so that the names created in it last (a
// variable, for tests of a sync that fails).
var syncDir = func(op, key, dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fileErr(op, key, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fileErr(op, key, err)
	}
	return nil
}

func (b *fileBucket) Delete(ctx context.Context, key string) error {
	p, err := b.path("delete", key)
	if err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if fi, err := os.Stat(p); err == nil && fi.IsDir() {
		return newError("delete", key, ErrNotFound, syscall.EISDIR)
	}
	if err := os.Remove(p); err != nil {
		return fileErr("delete", key, err)
	}
	return nil
}

func (b *fileBucket) Attributes(ctx context.Context, key string) (Attributes, error) {
	p, err := b.path("attributes", key)
	if err != nil {
		return Attributes{}, err
	}
	if err := ctx.Err(); err != nil {
		return Attributes{}, err
	}
	fi, err := os.Stat(p)
	if err == nil && fi.IsDir() {
		err = syscall.EISDIR
	}
	if err != nil {
		return Attributes{}, fileErr("attributes", key, err)
	}
	return Attributes{Size: fi.Size(), ModTime: fi.ModTime()}, nil
}

// ListPage walks the folder tree in key order: inside each folder, entries
// are visited sorted by name, with a folder compared as "name/" so that
// the walk yields full keys in ascending byte order. The page token is the
// last key returned; subtrees entirely at or before it are skipped.
func (b *fileBucket) ListPage(ctx context.Context, prefix, token string, pageSize int) (Page, error) {
	if err := checkPrefix(prefix); err != nil {
		return Page{}, newError("list", prefix, ErrPermanent, err)
	}
	if pageSize <= 0 {
		pageSize = fileDefaultPageSize
	}
	// Start at the deepest folder that holds every key with the prefix.
	dirKey := ""
	if i := strings.LastIndex(prefix, "/"); i >= 0 {
		dirKey = prefix[:i+1]
	}
	var page Page
	full := false
	var walk func(dir, keyPrefix string) error
	walk = func(dir, keyPrefix string) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		entries, err := os.ReadDir(dir)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
				return nil
			}
			return fileErr("list", prefix, err)
		}
		type entry struct {
			name  string // sort name: a folder's ends in "/"
			isDir bool
		}
		es := make([]entry, 0, len(entries))
		for _, e := range entries {
			if keyPrefix == "" && e.Name() == tmpDir {
				continue
			}
			if e.IsDir() {
				es = append(es, entry{e.Name() + "/", true})
			} else if e.Type().IsRegular() {
				es = append(es, entry{e.Name(), false})
			}
		}
		slices.SortFunc(es, func(a, b entry) int { return strings.Compare(a.name, b.name) })
		for _, e := range es {
			k := keyPrefix + e.name
			if e.isDir {
				// Skip folders that cannot hold a key with the prefix, or
				// whose keys all sort at or before the token.
				if !strings.HasPrefix(k, prefix) && !strings.HasPrefix(prefix, k) {
					continue
				}
				if token != "" && k < token && !strings.HasPrefix(token, k) {
					continue
				}
				if err := walk(filepath.Join(dir, e.name), k); err != nil {
					return err
				}
				if full {
					return nil
				}
				continue
			}
			if !strings.HasPrefix(k, prefix) || (token != "" && k <= token) {
				continue
			}
			if len(page.Objects) == pageSize {
				full = true
				page.Next = page.Objects[len(page.Objects)-1].Key
				return nil
			}
			fi, err := os.Stat(filepath.Join(dir, e.name))
			if err != nil {
				continue // deleted since the folder was read
			}
			page.Objects = append(page.Objects, ObjectInfo{Key: k, Size: fi.Size(), ModTime: fi.ModTime()})
		}
		return nil
	}
	if err := walk(filepath.Join(b.root, filepath.FromSlash(dirKey)), dirKey); err != nil {
		return Page{}, err
	}
	return page, nil
}

func (b *fileBucket) Close() error { return nil }
