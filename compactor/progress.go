package compactor

import (
	"context"
	"io"
	"strings"
	"sync"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/table/format"
)

// progressOf returns b, its reads of fragments counted and told to fn
// against the plan's source bytes; b itself when fn is nil.
func progressOf(b blob.Bucket, plan Plan, fn func(done, total int64)) blob.Bucket {
	if fn == nil {
		return b
	}
	var total int64
	for _, bin := range plan.Bins {
		total += bin.Bytes
	}
	fn(0, total)
	return &readProgress{Bucket: b, total: total, fn: fn}
}

// readProgress counts the bytes read of objects under data/, telling
// fn in order (reads run in parallel).
type readProgress struct {
	blob.Bucket
	mu    sync.Mutex
	done  int64
	total int64
	fn    func(done, total int64)
}

func (p *readProgress) Unwrap() blob.Bucket { return p.Bucket }

func (p *readProgress) add(key string, n int) {
	if n > 0 && strings.HasPrefix(key, format.DataDir) {
		p.mu.Lock()
		defer p.mu.Unlock()
		p.done += int64(n)
		p.fn(p.done, p.total)
	}
}

func (p *readProgress) Get(ctx context.Context, key string) ([]byte, error) {
	data, err := p.Bucket.Get(ctx, key)
	p.add(key, len(data))
	return data, err
}

func (p *readProgress) NewRangeReader(ctx context.Context, key string, off, n int64) (io.ReadCloser, error) {
	r, err := p.Bucket.NewRangeReader(ctx, key, off, n)
	if err != nil {
		return nil, err
	}
	return &countedReader{ReadCloser: r, add: func(n int) { p.add(key, n) }}, nil
}

type countedReader struct {
	io.ReadCloser
	add func(int)
}

func (c *countedReader) Read(b []byte) (int, error) {
	n, err := c.ReadCloser.Read(b)
	c.add(n)
	return n, err
}
