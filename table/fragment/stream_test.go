package fragment

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/table/format"
)

// heldBucket holds the ranged reads it is told to until open is closed,
// and can cut or fail a range's response part way.
type heldBucket struct {
	blob.Bucket
	hold func(off int64) bool // this range waits for open
	open chan struct{}
	cut  func(off int64) (after int64, err error) // this range ends after `after` bytes with err (io.EOF: cut short)
}

func (h *heldBucket) NewRangeReader(ctx context.Context, key string, off, n int64) (io.ReadCloser, error) {
	if h.hold != nil && h.hold(off) {
		select {
		case <-h.open:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	rc, err := h.Bucket.NewRangeReader(ctx, key, off, n)
	if err != nil || h.cut == nil {
		return rc, err
	}
	if after, cerr := h.cut(off); after >= 0 {
		return cutReader{io.LimitReader(rc, after), rc, cerr}, nil
	}
	return rc, nil
}

type cutReader struct {
	r   io.Reader
	c   io.Closer
	err error
}

func (c cutReader) Read(b []byte) (int, error) {
	n, err := c.r.Read(b)
	if err == io.EOF {
		err = c.err
	}
	return n, err
}

func (c cutReader) Close() error { return c.c.Close() }

// streamObject stores size random bytes as key in a fresh bucket.
func streamObject(t *testing.T, size int) (blob.Bucket, *format.Fragment, []byte) {
	t.Helper()
	b, err := blob.Open(context.Background(), "mem://")
	if err != nil {
		t.Fatal(err)
	}
	data := make([]byte, size)
	r := rand.New(rand.NewPCG(1, 2))
	for i := range data {
		data[i] = byte(r.Uint32())
	}
	if err := b.PutIfAbsent(context.Background(), "data/x.parquet", data); err != nil {
		t.Fatal(err)
	}
	return b, &format.Fragment{Key: "data/x.parquet", Bytes: int64(size)}, data
}

// readAtSoon is s.ReadAt(p, off), or ok false when it has not returned
// within wait.
func readAtSoon(s *Stream, p []byte, off int64, wait time.Duration) (n int, err error, ok bool) {
	type result struct {
		n   int
		err error
	}
	done := make(chan result, 1)
	go func() {
		n, err := s.ReadAt(p, off)
		done <- result{n, err}
	}()
	select {
	case r := <-done:
		return r.n, r.err, true
	case <-time.After(wait):
		return 0, nil, false
	}
}

// A read waits for its own bytes only: with every range of the body but
// the first held back, the object's start and its tail read at once, and
// a read reaching into a held range waits for it; then every read is the
// object's bytes.
func TestAStreamServesBytesAsTheyArrive(t *testing.T) {
	under, f, data := streamObject(t, 20<<20)
	h := &heldBucket{Bucket: under, open: make(chan struct{}),
		hold: func(off int64) bool { return off > 0 && off < f.Bytes-format.TailBytes }}
	s := newStream(context.Background(), h, f)
	defer s.Close()
	if len(s.ranges) != 1+streamMinParts {
		t.Fatalf("%d ranges for 20 MB, want the tail and %d parts", len(s.ranges), streamMinParts)
	}
	first := s.ranges[1].end // the first part of the body: [0, first)
	for _, off := range []int64{0, first - 1000, f.Bytes - 1000} {
		p := make([]byte, 1000)
		n, err, ok := readAtSoon(s, p, off, 30*time.Second)
		if !ok || err != nil || n != 1000 || !bytes.Equal(p, data[off:off+1000]) {
			t.Fatalf("read at %d while later ranges are held: %d bytes, %v, returned %v", off, n, err, ok)
		}
	}
	if _, _, ok := readAtSoon(s, make([]byte, 2000), first-1000, 100*time.Millisecond); ok {
		t.Fatal("a read into a range not yet arrived returned")
	}
	close(h.open)
	across := make([]byte, 2000)
	if n, err, ok := readAtSoon(s, across, first-1000, 30*time.Second); !ok || err != nil || n != 2000 || !bytes.Equal(across, data[first-1000:first+1000]) {
		t.Fatalf("read across two ranges: %d bytes, %v, returned %v", n, err, ok)
	}
	all := make([]byte, f.Bytes+10)
	n, err := s.ReadAt(all, 0)
	if n != int(f.Bytes) || err != io.EOF || !bytes.Equal(all[:n], data) {
		t.Fatalf("read of the whole object and past its end: %d bytes, %v", n, err)
	}
	if n, err := s.ReadAt(all, f.Bytes); n != 0 || err != io.EOF {
		t.Fatalf("read at the end: %d, %v", n, err)
	}
	if end, err := s.Seek(0, io.SeekEnd); end != f.Bytes || err != nil {
		t.Fatalf("seek to the end: %d, %v", end, err)
	}
	if err := s.failure(); err != nil {
		t.Fatal(err)
	}
}

// Once a range fails, a read of bytes that have not all arrived fails
// with its error, and one of bytes that have is served; a range the network cut short while the
// object is whole is a retryable error, not damage; a read waiting when
// the stream is closed returns.
func TestAStreamFailsOnlyTheReadsItCannotServe(t *testing.T) {
	under, f, data := streamObject(t, 20<<20)
	reset := errors.New("connection reset")
	var second int64
	h := &heldBucket{Bucket: under, open: make(chan struct{}), hold: func(off int64) bool { return off == second }, cut: func(off int64) (int64, error) {
		if off == second {
			return 1000, reset
		}
		return -1, nil
	}}
	second = (f.Bytes - format.TailBytes + streamMinParts - 1) / streamMinParts
	s := newStream(context.Background(), h, f)
	if s.ranges[2].start != second {
		t.Fatalf("the second part starts at %d, not %d", s.ranges[2].start, second)
	}
	p := make([]byte, 500)
	if n, err := s.ReadAt(p, 0); err != nil || n != 500 || !bytes.Equal(p, data[:500]) {
		t.Fatalf("a read of another range: %d, %v", n, err)
	}
	close(h.open)
	if n, err := s.ReadAt(p, second+100); err != nil || n != 500 || !bytes.Equal(p, data[second+100:second+600]) {
		t.Fatalf("a read of bytes that arrived before the failure: %d, %v", n, err)
	}
	if _, err := s.ReadAt(p, second+900); !errors.Is(err, reset) || !errors.Is(s.failure(), reset) {
		t.Fatalf("a read past the failure: %v (failure %v)", err, s.failure())
	}
	if n, err := s.ReadAt(p, 0); err != nil || n != 500 {
		t.Fatalf("a read of bytes that arrived, after the failure: %d, %v", n, err)
	}
	s.Close()

	h.hold = nil
	h.cut = func(off int64) (int64, error) {
		if off == 0 {
			return 1000, io.EOF
		}
		return -1, nil
	}
	s = newStream(context.Background(), h, f)
	_, err := s.ReadAt(p, 800)
	var ce *format.CorruptError
	if !blob.IsRetryable(err) || errors.As(err, &ce) {
		t.Fatalf("a range cut short of a whole object: %v, want a retryable error", err)
	}
	s.Close()

	h.cut, h.open = nil, make(chan struct{})
	h.hold = func(off int64) bool { return off == 0 }
	s = newStream(context.Background(), h, f)
	waiting := make(chan error, 1)
	go func() {
		_, err := s.ReadAt(p, 0)
		waiting <- err
	}()
	time.Sleep(50 * time.Millisecond)
	s.Close()
	select {
	case err := <-waiting:
		if err == nil {
			t.Fatal("a read of bytes that never came returned no error")
		}
	case <-time.After(30 * time.Second):
		t.Fatal("a read waiting when the stream closed still waits")
	}
}
