package blob

import (
	"context"
	"io"
	"iter"
	"time"
)

// Bucket is a flat namespace of immutable-by-convention objects. Keys are
// slash-separated paths of non-empty segments, none of them "." or ".."
// (see CheckKey). No key may also be a folder of another key ("a/b" beside
// "a/b/c"): local folders and MinIO cannot hold both, and Strata's layout
// never needs it.
//
// Every method takes a context and returns errors of type *Error (or a
// context error once ctx is done). Implementations are safe for concurrent
// use by many goroutines.
type Bucket interface {
	// Get returns the whole object. A missing key gives ErrNotFound.
	Get(ctx context.Context, key string) ([]byte, error)

	// NewRangeReader reads length bytes from offset (length < 0 reads to
	// the end). A missing key gives ErrNotFound; an offset past the end
	// gives an empty reader. The caller closes the reader.
	NewRangeReader(ctx context.Context, key string, offset, length int64) (io.ReadCloser, error)

	// PutIfAbsent creates the object only if no object has the key. If one
	// does, it returns ErrExists and leaves it untouched. It is atomic
	// across goroutines and processes. Any other error leaves it unknown
	// whether the object was created.
	PutIfAbsent(ctx context.Context, key string, data []byte) error

	// Put creates or replaces the object with the whole of r. Readers see
	// the old object or the new one, never a part of either. Strata uses
	// it only for objects with fresh random names and advisory hints.
	Put(ctx context.Context, key string, r io.Reader) error

	// Delete removes the object. Deleting a missing key gives ErrNotFound.
	Delete(ctx context.Context, key string) error

	// ListPage returns up to pageSize objects whose keys start with prefix,
	// in ascending byte order of key, starting after the position that
	// pageToken marks (empty: the beginning). Page.Next is empty on the
	// last page. pageSize <= 0 means a backend default.
	ListPage(ctx context.Context, prefix, pageToken string, pageSize int) (Page, error)

	// ListDir lists one level of the folder prefix (empty, or ending in
	// "/"), as a LIST with delimiter "/" does: up to pageSize entries in
	// ascending byte order of key, each an object whose key has no "/"
	// after prefix, or a folder — prefix, the next segment of deeper keys,
	// and "/" — named once however many keys lie below it. A page is one
	// request whatever the folders hold. pageToken and DirPage.Next work as
	// for ListPage; pageSize counts objects and folders. A prefix that is
	// not a folder's is an ErrPermanent error. A local folder's bucket may
	// list a folder that holds nothing any more.
	ListDir(ctx context.Context, prefix, pageToken string, pageSize int) (DirPage, error)

	// Attributes returns the object's size and modification time. A
	// missing key gives ErrNotFound.
	Attributes(ctx context.Context, key string) (Attributes, error)

	// Close releases the bucket's resources.
	Close() error
}

// Attributes describe one object.
type Attributes struct {
	Size    int64
	ModTime time.Time
}

// ObjectInfo is one entry of a listing.
type ObjectInfo struct {
	Key     string
	Size    int64
	ModTime time.Time
}

// Page is one page of a listing.
type Page struct {
	Objects []ObjectInfo
	Next    string // token for the next page; empty on the last page
}

// DirPage is one page of a one-level listing (Bucket.ListDir).
type DirPage struct {
	Objects []ObjectInfo
	Folders []string // full keys, each ending in "/"
	Next    string   // token for the next page; empty on the last page
}

// List iterates over every object under prefix in ascending key order,
// fetching pages of pageSize (<= 0: the backend's default). It stops at the
// first error, which it yields.
func List(ctx context.Context, b Bucket, prefix string, pageSize int) iter.Seq2[ObjectInfo, error] {
	return func(yield func(ObjectInfo, error) bool) {
		token := ""
		for {
			page, err := b.ListPage(ctx, prefix, token, pageSize)
			if err != nil {
				yield(ObjectInfo{}, err)
				return
			}
			for _, o := range page.Objects {
				if !yield(o, nil) {
					return
				}
			}
			if page.Next == "" {
				return
			}
			token = page.Next
		}
	}
}

// Unwrapper is implemented by buckets that wrap another bucket.
type Unwrapper interface {
	Unwrap() Bucket
}
