package format

import (
	"context"
	"io"
	"sync"

	"golang.org/x/sync/semaphore"

	"github.com/stratadb/strata/blob"
)

// TailBytes is how much of a remote fragment's end the first request
// reads: the Parquet footer's length and the footer itself, in one round
// trip instead of two, for any footer up to this size.
const TailBytes = 64 << 10

// Prefetcher reads a remote fragment for a scan: it serves the Parquet
// reader's ReadAt calls from ranges fetched ahead — the object's tail at
// once, then the column chunks the scan will read, several in flight, at
// most budget bytes fetched and not yet consumed — and reads anything else
// with a ranged request of its own. A range is handed out once, then
// dropped.
//
// The reader asks for each column chunk with exactly one ReadAt of the
// chunk's offset and length (unbuffered streams, as openFragment sets), so
// the ranges computed from the footer match the reads.
type Prefetcher struct {
	*blob.ReaderAt
	ctx    context.Context
	cancel context.CancelFunc
	size   int64 // the budget's bound
	budget *semaphore.Weighted
	wg     sync.WaitGroup
	mu     sync.Mutex
	ranges map[int64]*fetched // by offset
	taken  map[int64]bool     // offsets read already: not to be fetched again
}

type fetched struct {
	off    int64
	data   []byte
	weight int64 // held of the budget until consumed
	tail   bool  // the object's end: serves every footer read, kept until close
	reads  int   // the reads it serves before it is dropped (not the tail)
	err    error
	done   chan struct{}
}

// NewPrefetcher reads key (of size bytes) in b; its requests end when
// the prefetcher is closed, so a scan left early does not wait for them.
func NewPrefetcher(ctx context.Context, b blob.Bucket, key string, size, budget int64) *Prefetcher {
	return NewPrefetcherTail(ctx, b, key, size, budget, TailBytes)
}

// NewPrefetcherTail is NewPrefetcher fetching the object's last tail
// bytes first (its footer's length, when the fragment's entry records it:
// Fragment.Footer) rather than TailBytes.
func NewPrefetcherTail(ctx context.Context, b blob.Bucket, key string, size, budget, tail int64) *Prefetcher {
	return newPrefetcher(ctx, b, key, size, budget, tail, nil)
}

// NewPrefetcherKnown is NewPrefetcher given the object's last bytes, read
// before (its footer, kept): it asks for them no more.
func NewPrefetcherKnown(ctx context.Context, b blob.Bucket, key string, size, budget int64, known []byte) *Prefetcher {
	return newPrefetcher(ctx, b, key, size, budget, TailBytes, known)
}

func newPrefetcher(ctx context.Context, b blob.Bucket, key string, size, budget, tail int64, known []byte) *Prefetcher {
	ctx, cancel := context.WithCancel(ctx)
	r := blob.NewReaderAtSize(ctx, b, key, size)
	budget = max(budget, TailBytes)
	p := &Prefetcher{ReaderAt: r, ctx: ctx, cancel: cancel, size: budget, budget: semaphore.NewWeighted(budget),
		ranges: map[int64]*fetched{}, taken: map[int64]bool{}}
	if n := int64(len(known)); n > 0 && n <= r.Size() && p.budget.TryAcquire(n) {
		f := &fetched{off: r.Size() - n, data: known, weight: n, tail: true}
		p.register(f)
		close(f.done)
		return p
	}
	tail = min(r.Size(), max(tail, 8), budget)
	if p.budget.TryAcquire(tail) {
		p.start(&fetched{off: r.Size() - tail, weight: tail, tail: true})
	}
	return p
}

// start reads f's range in the background.
func (p *Prefetcher) start(f *fetched) {
	p.mu.Lock()
	p.register(f)
	p.mu.Unlock()
	p.fetch(f)
}

// register makes f the range a ReadAt at its offset waits for (p.mu held).
func (p *Prefetcher) register(f *fetched) {
	f.done = make(chan struct{})
	p.ranges[f.off] = f
}

// fetch reads f's range, registered, in the background.
func (p *Prefetcher) fetch(f *fetched) {
	p.wg.Go(func() {
		defer close(f.done)
		buf := make([]byte, f.weight)
		m, err := p.ReaderAt.ReadAt(buf, f.off)
		if err == io.EOF && int64(m) == f.weight {
			err = nil
		}
		f.data, f.err = buf[:m], err
	})
}

// Prefetch fetches ranges (offset, length) in order, in the background,
// each once there is room in the budget; a range larger than the whole
// budget is left to be read when asked for.
//
// A range within one already fetched (PrefetchSpans) is left to it.
func (p *Prefetcher) Prefetch(ranges [][2]int64) {
	spans := make([]Span, len(ranges))
	for i, r := range ranges {
		spans[i] = Span{Off: r[0], Len: r[1], Reads: 1}
	}
	p.PrefetchSpans(spans)
}

// PrefetchSpans is Prefetch of spans, each read in one request and kept
// until it has served its Reads reads. Those the budget has room for at
// once are registered before it returns (so that a later Prefetch of a
// range within one leaves it to that one), the others once there is.
func (p *Prefetcher) PrefetchSpans(spans []Span) {
	for i, s := range spans {
		if p.skip(s) {
			continue
		}
		if !p.budget.TryAcquire(s.Len) {
			rest := spans[i:]
			p.wg.Go(func() {
				for _, s := range rest {
					if p.skip(s) {
						continue
					}
					if p.budget.Acquire(p.ctx, s.Len) != nil {
						return
					}
					p.claim(s)
				}
			})
			return
		}
		p.claim(s)
	}
}

// skip tells whether s is not to be fetched ahead: empty, larger than
// the whole budget (read when asked for), or within a range fetched.
func (p *Prefetcher) skip(s Span) bool {
	return s.Len <= 0 || s.Len > p.size || p.within(s.Off, s.Off+s.Len) != nil
}

// claim fetches s, its weight taken from the budget, unless the reader
// read at its offset already.
func (p *Prefetcher) claim(s Span) {
	// Checked and registered at once: a ReadAt in between would read the
	// chunk itself, and the chunk be fetched twice.
	p.mu.Lock()
	taken := p.taken[s.Off]
	f := &fetched{off: s.Off, weight: s.Len, reads: max(s.Reads, 1)}
	if !taken {
		p.register(f)
	}
	p.mu.Unlock()
	if taken {
		p.budget.Release(s.Len) // the reader got there first
		return
	}
	p.fetch(f)
}

// within returns the range registered that holds [off, end), or nil.
func (p *Prefetcher) within(off, end int64) *fetched {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.holding(off, end)
}

// holding is within with p.mu held.
func (p *Prefetcher) holding(off, end int64) *fetched {
	for start, f := range p.ranges {
		if off >= start && end <= start+f.weight {
			return f
		}
	}
	return nil
}

// ReadAt serves a read from a range fetched ahead when one holds it, and
// reads it from the store otherwise.
func (p *Prefetcher) ReadAt(b []byte, off int64) (int, error) {
	end := off + int64(len(b))
	p.mu.Lock()
	hit := p.holding(off, end)
	if hit == nil {
		p.taken[off] = true
	}
	p.mu.Unlock()
	if hit == nil {
		return p.ReaderAt.ReadAt(b, off)
	}
	select {
	case <-hit.done:
	case <-p.ctx.Done():
		return 0, p.ctx.Err()
	}
	if hit.err != nil || end > hit.off+int64(len(hit.data)) {
		p.drop(hit)
		return p.ReaderAt.ReadAt(b, off)
	}
	n := copy(b, hit.data[off-hit.off:])
	if !hit.tail {
		p.served(hit) // a column chunk is read once
	}
	return n, nil
}

// served counts a read f served, and drops f after its last.
func (p *Prefetcher) served(f *fetched) {
	p.mu.Lock()
	f.reads--
	last := f.reads <= 0
	p.mu.Unlock()
	if last {
		p.drop(f)
	}
}

func (p *Prefetcher) drop(f *fetched) {
	p.mu.Lock()
	if p.ranges[f.off] == f {
		delete(p.ranges, f.off)
		p.budget.Release(f.weight)
	}
	p.mu.Unlock()
}

// Tail is the object's end as fetched for its footer (tailBytes, or the
// whole object when smaller); nil when it was not fetched whole.
func (p *Prefetcher) Tail() []byte {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, f := range p.ranges {
		if f.tail {
			select {
			case <-f.done:
				if f.err == nil && int64(len(f.data)) == f.weight {
					return f.data
				}
			default:
			}
		}
	}
	return nil
}

// Close stops fetching and lets go of what was fetched.
func (p *Prefetcher) Close() {
	p.cancel()
	p.wg.Wait()
	p.mu.Lock()
	p.ranges = map[int64]*fetched{}
	p.mu.Unlock()
}
