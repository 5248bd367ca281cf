package fragment

import (
	"context"
	"errors"
	"io"
	"sync"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/table/format"
)

// Stream reads a fragment object whole — its tail (the Parquet footer)
// and its body in ranges of about streamPart, all at once — and serves
// reads of it as its bytes arrive: a read waits for the bytes it asks for
// and no others. A scan so decodes a row group while the ones after it are
// still on their way, instead of waiting for the whole object first
// (through a 20 ms proxy that passes 100 MB/s per response, the
// benchmark's 45 MB fragment took about 0.13 s to fetch and 0.06 s more to
// decode).
//
// Invariant: a read returns bytes only once every range it covers has
// delivered them, and then only the object's bytes. Once a range has
// failed, a read of bytes not all delivered fails with its error (see
// failure) rather than wait: the scan is lost, and ends sooner.
type Stream struct {
	f      *format.Fragment
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu     sync.Mutex
	cond   sync.Cond
	ranges []streamRange
	err    error // the first range's failure
	closed bool  // close ended the reads: their errors are not failures
}

type streamRange struct {
	start, end, got int64  // got: bytes delivered from start
	data            []byte // the range's buffer, set once it is made
}

// streamPart is about the size of each range a stream reads its body in,
// at least streamMinParts and at most streamMaxParts of them: the store
// sends a range over one connection, and one connection to a remote store
// carries some tens to a hundred MB/s.
const (
	streamPart     = 8 << 20
	streamMinParts = 4
	streamMaxParts = 16
)

// newStream starts reading fragment f (f.Bytes > 0) from b; close ends it.
func newStream(ctx context.Context, b blob.Bucket, f *format.Fragment) *Stream {
	return NewStreamFrom(ctx, b, f, nil)
}

// NewStreamFrom is newStream given the object's tail when it was read
// already (for the footer): the last min(f.Bytes, tailBytes) bytes, or nil.
func NewStreamFrom(ctx context.Context, b blob.Bucket, f *format.Fragment, tail []byte) *Stream {
	ctx, cancel := context.WithCancel(ctx)
	s := &Stream{f: f, cancel: cancel}
	s.cond.L = &s.mu
	body := f.Bytes - min(f.Bytes, format.TailBytes)
	s.ranges = append(s.ranges, streamRange{start: body, end: f.Bytes}) // asked for first
	if int64(len(tail)) == f.Bytes-body {
		s.ranges[0].data, s.ranges[0].got = tail, int64(len(tail))
	}
	parts := min(max((body+streamPart-1)/streamPart, streamMinParts), streamMaxParts)
	part := (body + parts - 1) / parts
	for off := int64(0); off < body; off += part {
		s.ranges = append(s.ranges, streamRange{start: off, end: min(off+part, body)})
	}
	for i := range s.ranges {
		if s.ranges[i].data == nil {
			s.wg.Go(func() { s.fill(ctx, b, i) })
		}
	}
	return s
}

// fill reads range i, making its bytes available as they arrive. Its
// buffer is made while the request is on its way: a large one takes a
// while to allocate (tens of milliseconds for 45 MB, seen in the benchmark,
// where the heap is not fresh).
func (s *Stream) fill(ctx context.Context, b blob.Bucket, i int) {
	start, end := s.ranges[i].start, s.ranges[i].end // these do not change
	made := make(chan []byte, 1)
	go func() { made <- make([]byte, end-start) }()
	err := func() error {
		rc, err := b.NewRangeReader(ctx, s.f.Key, start, end-start)
		buf := <-made
		if err != nil {
			return err
		}
		defer rc.Close()
		s.mu.Lock()
		s.ranges[i].data = buf
		s.mu.Unlock()
		for got := 0; got < len(buf); {
			n, err := rc.Read(buf[got:])
			if n > 0 {
				got += n
				s.mu.Lock()
				s.ranges[i].got = int64(got)
				s.mu.Unlock()
				s.cond.Broadcast()
			}
			switch {
			case (err == io.EOF || err == io.ErrUnexpectedEOF) && got < len(buf):
				return s.short(ctx, b)
			case err == io.EOF:
				return nil
			case err != nil:
				return err
			}
		}
		return nil
	}()
	if err != nil {
		s.mu.Lock()
		if s.err == nil && !s.closed {
			s.err = err
		}
		s.mu.Unlock()
		s.cond.Broadcast()
	}
}

// short is the error of a range that ended before its end: the object is
// shorter than the manifest records (damage: a CorruptError naming it),
// unless the store says otherwise (then the network cut the response).
func (s *Stream) short(ctx context.Context, b blob.Bucket) error {
	if a, err := b.Attributes(ctx, s.f.Key); err == nil && a.Size != s.f.Bytes {
		return wrongSize(s.f, a.Size)
	}
	return &blob.Error{Op: "range-get", Key: s.f.Key, Kind: blob.ErrRetryable, Err: errors.New("object shorter than its recorded size")}
}

// arrived reports whether bytes [off, end) have all been delivered (s.mu
// held).
func (s *Stream) arrived(off, end int64) bool {
	for _, r := range s.ranges {
		if off < r.end && end > r.start && r.start+r.got < min(end, r.end) {
			return false
		}
	}
	return true
}

// ReadAt waits for bytes [off, off+len(b)) of the object and copies them.
func (s *Stream) ReadAt(b []byte, off int64) (int, error) {
	size := s.f.Bytes
	if off < 0 {
		return 0, errors.New("table: negative offset")
	}
	if off >= size {
		return 0, io.EOF
	}
	end := min(off+int64(len(b)), size)
	type piece struct {
		start int64
		data  []byte
	}
	var pieces []piece // the ranges' bytes a read copies, once arrived
	s.mu.Lock()
	for !s.arrived(off, end) && s.err == nil && !s.closed {
		s.cond.Wait()
	}
	ok, err := s.arrived(off, end), s.err
	if ok {
		for _, r := range s.ranges {
			if off < r.end && end > r.start {
				from := max(off, r.start)
				pieces = append(pieces, piece{from, r.data[from-r.start : min(end, r.end)-r.start]})
			}
		}
	}
	s.mu.Unlock()
	if !ok {
		if err == nil {
			err = errors.New("table: fragment stream closed")
		}
		return 0, err
	}
	n := 0
	for _, p := range pieces { // delivered bytes do not change
		n += copy(b[p.start-off:], p.data)
	}
	if n < len(b) {
		return n, io.EOF
	}
	return n, nil
}

// Seek answers the one question the Parquet reader asks with it, the
// object's size (Seek(0, io.SeekEnd)); every read is a ReadAt, by offset.
func (s *Stream) Seek(offset int64, whence int) (int64, error) {
	if whence != io.SeekEnd || s.f.Bytes+offset < 0 {
		return 0, errors.New("table: a fragment stream seeks only from its end, to within it")
	}
	return s.f.Bytes + offset, nil
}

// failure is the error of the first range that failed, nil while none
// has. A read that failed for want of bytes failed with it: what the
// Parquet reader makes of that read (a damaged page, say) is not the
// object's fault.
func (s *Stream) failure() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// Close stops the reads still in flight and waits for them; a read
// waiting for bytes returns an error. Closing again does nothing more.
func (s *Stream) Close() {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.cond.Broadcast()
	s.cancel()
	s.wg.Wait()
}
