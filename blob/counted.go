package blob

import (
	"context"
	"errors"
	"io"
	"sync/atomic"
	"time"
)

// Stats counts the requests a bucket made, by kind. Object stores bill per
// request, so these say what a workload costs.
type Stats struct {
	Gets         int64 // whole-object reads
	RangeGets    int64 // ranged reads
	Puts         int64 // unconditional writes
	CondPutsWon  int64 // conditional creates that created the object
	CondPutsLost int64 // conditional creates refused because the object existed
	CondPutsErr  int64 // conditional creates that failed otherwise (outcome unknown)
	Lists        int64 // list pages
	Deletes      int64
	Heads        int64 // attribute reads
	BytesIn      int64 // bytes read from the store
	BytesOut     int64 // bytes written to the store
}

// Requests is the total number of requests.
func (s Stats) Requests() int64 {
	return s.Gets + s.RangeGets + s.Puts + s.CondPutsWon + s.CondPutsLost + s.CondPutsErr + s.Lists + s.Deletes + s.Heads
}

// Sub returns s minus o, field by field: the requests made between two
// snapshots.
func (s Stats) Sub(o Stats) Stats {
	return Stats{
		Gets: s.Gets - o.Gets, RangeGets: s.RangeGets - o.RangeGets, Puts: s.Puts - o.Puts,
		CondPutsWon: s.CondPutsWon - o.CondPutsWon, CondPutsLost: s.CondPutsLost - o.CondPutsLost,
		CondPutsErr: s.CondPutsErr - o.CondPutsErr, Lists: s.Lists - o.Lists, Deletes: s.Deletes - o.Deletes,
		Heads: s.Heads - o.Heads, BytesIn: s.BytesIn - o.BytesIn, BytesOut: s.BytesOut - o.BytesOut,
	}
}

// Add returns s plus o, field by field.
func (s Stats) Add(o Stats) Stats {
	return Stats{
		Gets: s.Gets + o.Gets, RangeGets: s.RangeGets + o.RangeGets, Puts: s.Puts + o.Puts,
		CondPutsWon: s.CondPutsWon + o.CondPutsWon, CondPutsLost: s.CondPutsLost + o.CondPutsLost,
		CondPutsErr: s.CondPutsErr + o.CondPutsErr, Lists: s.Lists + o.Lists, Deletes: s.Deletes + o.Deletes,
		Heads: s.Heads + o.Heads, BytesIn: s.BytesIn + o.BytesIn, BytesOut: s.BytesOut + o.BytesOut,
	}
}

// Counted is a Bucket that counts the requests it passes on, and times
// them for an Observer when one is set.
type Counted struct {
	b Bucket
	c struct {
		gets, rangeGets, puts, condWon, condLost, condErr, lists, deletes, heads, in, out atomic.Int64
	}
	observe atomic.Pointer[Observer]
}

// Observer is told of every request a Counted bucket makes: its
// operation (get, range_get, put, put_if_absent, delete, list,
// attributes), its outcome (ok, not_found, exists, error) and how long
// it took.
type Observer func(op, outcome string, d time.Duration)

// Observe sets the observer of the first Counted bucket found by
// unwrapping b; false when there is none.
func Observe(b Bucket, fn Observer) bool {
	for b != nil {
		if c, ok := b.(*Counted); ok {
			c.observe.Store(&fn)
			return true
		}
		u, ok := b.(Unwrapper)
		if !ok {
			break
		}
		b = u.Unwrap()
	}
	return false
}

// timed reports a request to the observer, if any; use it as
// defer c.timed(op, time.Now(), &err).
func (c *Counted) timed(op string, start time.Time, err *error) {
	fn := c.observe.Load()
	if fn == nil {
		return
	}
	outcome := "ok"
	switch {
	case *err == nil:
	case errors.Is(*err, ErrNotFound):
		outcome = "not_found"
	case errors.Is(*err, ErrExists):
		outcome = "exists"
	default:
		outcome = "error"
	}
	(*fn)(op, outcome, time.Since(start))
}

var _ Bucket = (*Counted)(nil)

// NewCounted wraps b with request counters.
func NewCounted(b Bucket) *Counted { return &Counted{b: b} }

// Stats returns a snapshot of the counters.
func (c *Counted) Stats() Stats {
	return Stats{
		Gets: c.c.gets.Load(), RangeGets: c.c.rangeGets.Load(), Puts: c.c.puts.Load(),
		CondPutsWon: c.c.condWon.Load(), CondPutsLost: c.c.condLost.Load(), CondPutsErr: c.c.condErr.Load(),
		Lists: c.c.lists.Load(), Deletes: c.c.deletes.Load(), Heads: c.c.heads.Load(),
		BytesIn: c.c.in.Load(), BytesOut: c.c.out.Load(),
	}
}

// StatsOf returns the counters of the first Counted bucket found by
// unwrapping b, and false if there is none.
func StatsOf(b Bucket) (Stats, bool) {
	for b != nil {
		if c, ok := b.(*Counted); ok {
			return c.Stats(), true
		}
		u, ok := b.(Unwrapper)
		if !ok {
			break
		}
		b = u.Unwrap()
	}
	return Stats{}, false
}

// Unwrap returns the bucket underneath.
func (c *Counted) Unwrap() Bucket { return c.b }

func (c *Counted) Get(ctx context.Context, key string) (data []byte, err error) {
	c.c.gets.Add(1)
	defer c.timed("get", time.Now(), &err)
	data, err = c.b.Get(ctx, key)
	c.c.in.Add(int64(len(data)))
	return data, err
}

func (c *Counted) NewRangeReader(ctx context.Context, key string, offset, length int64) (_ io.ReadCloser, err error) {
	c.c.rangeGets.Add(1)
	defer c.timed("range_get", time.Now(), &err)
	r, err := c.b.NewRangeReader(ctx, key, offset, length)
	if err != nil {
		return nil, err
	}
	if s, ok := r.(Sized); ok {
		return &sizedCountingReader{countingReader{ReadCloser: r, n: &c.c.in}, s}, nil
	}
	return &countingReader{ReadCloser: r, n: &c.c.in}, nil
}

// sizedCountingReader is a countingReader that says the object's size.
type sizedCountingReader struct {
	countingReader
	Sized
}

type countingReader struct {
	io.ReadCloser
	n *atomic.Int64
}

func (r *countingReader) Read(p []byte) (int, error) {
	n, err := r.ReadCloser.Read(p)
	r.n.Add(int64(n))
	return n, err
}

func (c *Counted) PutIfAbsent(ctx context.Context, key string, data []byte) (err error) {
	defer c.timed("put_if_absent", time.Now(), &err)
	err = c.b.PutIfAbsent(ctx, key, data)
	switch {
	case err == nil:
		c.c.condWon.Add(1)
		c.c.out.Add(int64(len(data)))
	case errors.Is(err, ErrExists):
		c.c.condLost.Add(1)
	default:
		c.c.condErr.Add(1)
	}
	return err
}

func (c *Counted) Put(ctx context.Context, key string, r io.Reader) (err error) {
	c.c.puts.Add(1)
	defer c.timed("put", time.Now(), &err)
	cr := &countingReader{ReadCloser: io.NopCloser(r), n: &c.c.out}
	return c.b.Put(ctx, key, cr)
}

func (c *Counted) Delete(ctx context.Context, key string) (err error) {
	c.c.deletes.Add(1)
	defer c.timed("delete", time.Now(), &err)
	return c.b.Delete(ctx, key)
}

func (c *Counted) ListPage(ctx context.Context, prefix, token string, pageSize int) (_ Page, err error) {
	c.c.lists.Add(1)
	defer c.timed("list", time.Now(), &err)
	return c.b.ListPage(ctx, prefix, token, pageSize)
}

func (c *Counted) Attributes(ctx context.Context, key string) (_ Attributes, err error) {
	c.c.heads.Add(1)
	defer c.timed("attributes", time.Now(), &err)
	return c.b.Attributes(ctx, key)
}

func (c *Counted) Close() error { return c.b.Close() }
