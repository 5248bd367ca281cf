package blob

import (
	"context"
	"errors"
	"fmt"
	"io"
)

// Sized is a range reader (Bucket.NewRangeReader) that knows the size of
// the whole object it reads, as the store said it with the range; -1 when
// it did not.
type Sized interface {
	Size() int64
}

// ReaderAt reads one object with ranged requests: each ReadAt is one
// ranged GET. It lets Parquet readers fetch a footer and the column chunks
// they need without downloading the object. It also implements io.Seeker
// and io.Reader over the same requests, as Parquet readers expect.
//
// A ReaderAt holds the context it was made with, for use by ReadAt, whose
// signature has no room for one; make a new ReaderAt per operation.
type ReaderAt struct {
	ctx  context.Context
	b    Bucket
	key  string
	size int64
	pos  int64
}

// NewReaderAt returns a ReaderAt for key, asking the store for its size
// (one attribute request).
func NewReaderAt(ctx context.Context, b Bucket, key string) (*ReaderAt, error) {
	a, err := b.Attributes(ctx, key)
	if err != nil {
		return nil, err
	}
	return NewReaderAtSize(ctx, b, key, a.Size), nil
}

// NewReaderAtSize returns a ReaderAt for key when its size is already
// known (from a manifest, say), with no request.
func NewReaderAtSize(ctx context.Context, b Bucket, key string, size int64) *ReaderAt {
	return &ReaderAt{ctx: ctx, b: b, key: key, size: size}
}

// Size returns the object's size.
func (r *ReaderAt) Size() int64 { return r.size }

// ReadAt reads len(p) bytes at off with one ranged request.
func (r *ReaderAt) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, errors.New("blob: negative offset")
	}
	if off >= r.size {
		return 0, io.EOF
	}
	want := int64(len(p))
	short := false
	if off+want > r.size {
		want = r.size - off
		short = true
	}
	if want == 0 {
		return 0, nil
	}
	rc, err := r.b.NewRangeReader(r.ctx, r.key, off, want)
	if err != nil {
		return 0, err
	}
	defer rc.Close()
	// The store says how large the object is with every ranged read: one
	// not of the size recorded was cut short or replaced, whatever bytes
	// this range holds. (A store that does not say falls back to the
	// range's own length, which says nothing.)
	if s, ok := rc.(Sized); ok {
		if total := s.Size(); total >= 0 && total != r.size && total != want {
			return 0, newError("range-get", r.key, ErrRetryable, fmt.Errorf("object is %d bytes, its recorded size is %d", total, r.size))
		}
	}
	n, err := io.ReadFull(rc, p[:want])
	if err != nil {
		if err == io.ErrUnexpectedEOF || err == io.EOF {
			return n, newError("range-get", r.key, ErrRetryable, errors.New("object shorter than its recorded size"))
		}
		return n, err
	}
	if short {
		return n, io.EOF
	}
	return n, nil
}

// Read reads from the current position.
func (r *ReaderAt) Read(p []byte) (int, error) {
	n, err := r.ReadAt(p, r.pos)
	r.pos += int64(n)
	return n, err
}

// Seek sets the position for Read.
func (r *ReaderAt) Seek(offset int64, whence int) (int64, error) {
	switch whence {
	case io.SeekStart:
	case io.SeekCurrent:
		offset += r.pos
	case io.SeekEnd:
		offset += r.size
	default:
		return 0, errors.New("blob: bad whence")
	}
	if offset < 0 {
		return 0, errors.New("blob: negative position")
	}
	r.pos = offset
	return offset, nil
}
