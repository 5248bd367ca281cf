package table

import (
	"context"
	"sync"

	"golang.org/x/sync/semaphore"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/stratadb/strata/table/format"
	"github.com/stratadb/strata/table/fragment"
)

// Memory is a budget of bytes that the scans of a process share (a
// server's requests, say). A scan given one (ScanOptions.Memory) reserves
// from it, for each fragment and before decoding it, what reading that
// fragment will hold (see weight), and gives it back once the fragment's
// batches have all been used.
//
// A scan reserves in fragment order, from one goroutine, and never while
// a later fragment of its own holds a reservation: what it holds when it
// waits comes back without its taking any other (see inOrder). So scans
// sharing a budget whose holders all end without reserving more — as the
// scans' fragments do — cannot wait for one another in a cycle.
type Memory interface {
	// Reserve returns once n more bytes may be held, or with ctx's error,
	// or with the budget's own error (a server that will not wait longer,
	// say), which fails the scan. A budget smaller than n grants it
	// alone, or refuses it.
	Reserve(ctx context.Context, n int64) error
	// Release gives back n bytes a Reserve granted.
	Release(n int64)
}

// pageBytes is the Parquet data page size fragments are written with (the
// writer's default): a column is decompressed a page at a time.
const pageBytes = 1 << 20

// OpenAheadBytes is what a scan with a Memory budget holds besides what it
// reserves: the fragments it opened ahead of their reservation — a small
// fragment's object, or the bytes of its columns, or a larger one's tail —
// and their footers, as many as parallelism fragments
// (ScanOptions.Parallelism; 0 means DefaultMemoryParallelism) of the most
// a fragment opened ahead holds (openAheadCost). A caller counts it once
// per scan. Fragments smaller than that are opened ahead more at once, up
// to MaxOpenAhead, within the same bytes.
func OpenAheadBytes(parallelism int) int64 {
	if parallelism <= 0 {
		parallelism = DefaultMemoryParallelism
	}
	return int64(parallelism) * (fragment.WholeReadLimit + 2*format.TailBytes)
}

// MaxOpenAhead bounds the fragments a scan with a Memory budget opens
// ahead at once, however small: through a store 20 ms away, each one
// opened is a round trip under way.
const MaxOpenAhead = 64

// openAheadCost is the most fragment f holds opened ahead: its object (up
// to WholeReadLimit; a larger one's tail, or the spans of its columns, is
// less), and its footer decoded.
func openAheadCost(f *format.Fragment) int64 {
	return min(max(f.Bytes, 0), fragment.WholeReadLimit) + 2*format.TailBytes
}

// runWithin is run for a scan with a Memory budget: fragments are opened
// up to Parallelism ahead (their footers read), then, in order, each
// reserves its weight before it is decoded and gives it back once its
// batches are used.
func (p *scanPlan) runWithin(ctx context.Context, frags []*format.Fragment, use func(arrow.RecordBatch) bool) error {
	ctx, cancel := context.WithCancel(ctx)
	ahead := p.openAhead(ctx, frags)
	defer func() {
		cancel()
		ahead.drain()
	}()
	mem := p.opts.Memory
	opened := make([]*opened, len(frags))
	reserve := func(ctx context.Context, i int) (format.Reservation, error) {
		o, done, err := ahead.take(ctx, i)
		if err != nil {
			return format.Reservation{}, err
		}
		defer done()
		w := p.weight(o)
		if err := mem.Reserve(ctx, w); err != nil {
			o.close()
			return format.Reservation{}, err
		}
		opened[i] = o
		return format.Reservation{Used: func() {
			o.close()
			mem.Release(w)
		}}, nil
	}
	return format.InOrder(ctx, len(frags), p.opts.Parallelism, reserve,
		func(ctx context.Context, i int, emit func(arrow.RecordBatch) bool) error {
			o := opened[i]
			opened[i] = nil // the fragment's bytes go once it is used
			return p.decode(ctx, o, emit)
		},
		use, func(rec arrow.RecordBatch) { rec.Release() })
}

// opener opens a scan's fragments ahead of their reservations, in order,
// at most MaxOpenAhead at once and within OpenAheadBytes(Parallelism):
// a fragment takes a slot and its openAheadCost (all of it at most: a
// heavier one alone) before it is opened, and gives them back once it is
// reserved (or given up).
type opener struct {
	slots   chan struct{}
	bytes   *semaphore.Weighted
	costs   []int64
	results []chan openResult
	wg      sync.WaitGroup
}

type openResult struct {
	o   *opened
	err error
}

// openAhead starts opening frags; ctx's end stops it.
func (p *scanPlan) openAhead(ctx context.Context, frags []*format.Fragment) *opener {
	limit := OpenAheadBytes(p.opts.Parallelism)
	a := &opener{slots: make(chan struct{}, MaxOpenAhead), bytes: semaphore.NewWeighted(limit),
		costs: make([]int64, len(frags)), results: make([]chan openResult, len(frags))}
	for i := range a.results {
		a.results[i] = make(chan openResult, 1)
	}
	a.wg.Go(func() {
		for i, f := range frags {
			select {
			case a.slots <- struct{}{}:
			case <-ctx.Done():
				return
			}
			a.costs[i] = min(openAheadCost(f), limit)
			if a.bytes.Acquire(ctx, a.costs[i]) != nil {
				<-a.slots
				return
			}
			a.wg.Go(func() {
				o, err := p.open(ctx, f, true)
				a.results[i] <- openResult{o, err}
			})
		}
	})
	return a
}

// take waits for fragment i to be opened; done gives its token back.
func (a *opener) take(ctx context.Context, i int) (o *opened, done func(), err error) {
	select {
	case r := <-a.results[i]:
		if r.err != nil {
			a.give(i)
			return nil, nil, r.err
		}
		return r.o, func() { a.give(i) }, nil
	case <-ctx.Done():
		return nil, nil, ctx.Err()
	}
}

// give gives back what fragment i took to be opened ahead.
func (a *opener) give(i int) {
	a.bytes.Release(a.costs[i])
	<-a.slots
}

// drain waits for the opens under way, once the scan's context has
// ended, and closes the fragments opened and never taken.
func (a *opener) drain() {
	a.wg.Wait()
	for _, ch := range a.results {
		select {
		case r := <-ch:
			if r.o != nil {
				r.o.close()
			}
		default:
		}
	}
}
