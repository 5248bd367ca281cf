package server

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/semaphore"
)

// budget is the server's memory budget (Options.MemoryBudget): what
// requests may hold at once. It has three parts, each a queue of its own
// served in order:
//
//   - writes (Options.WriteShare, a quarter by default): appends and
//     creates with rows. A write that does not fit takes room from the
//     fragments part instead when that part has room and nobody waits
//     for it. Reads never use the writes part, so a steady writer is not
//     starved by readers however many there are;
//   - holds (a quarter of the rest): what a read holds from its start
//     to its end — a scan's fragments opened ahead of their reservation
//     (table.OpenAheadBytes) and what its answer's encoding buffers, a
//     fresh read's WAL rows, a take's body, keys and rows;
//   - fragments (the rest): what scans hold fragment by fragment, each
//     fragment's weight reserved before it is read and given back once
//     its rows are sent (table.Memory).
//
// A request's first reservation waits up to BusyWait, then the request
// is answered 429; so does every reservation of the holds and writes
// parts, all taken before the answer starts. A scan's later fragments
// wait as long as the request lasts: the answer has begun. They cannot
// wait in a cycle: what the fragments part holds is scans' fragments,
// each given back without any further reservation (see table.Memory),
// and writes, which take nothing more once admitted; no fragment waits
// for the other parts.
//
// A request larger than its part is granted the whole part, alone.
type budget struct {
	writes, holds, fragments *part
	wait                     time.Duration
}

// part is one part of the budget.
type part struct {
	sem  *semaphore.Weighted
	size int64
}

func newPart(size int64) *part {
	size = max(size, 1)
	return &part{sem: semaphore.NewWeighted(size), size: size}
}

// clamp is what a request of n bytes takes of the part: at least one
// byte, at most all of it.
func (p *part) clamp(n int64) int64 { return min(max(n, 1), p.size) }

// newBudget splits total bytes: writeShare for writes, a quarter of the
// rest for holds, the rest for fragments.
func newBudget(total, writeShare int64, wait time.Duration) *budget {
	reads := total - writeShare
	return &budget{writes: newPart(writeShare), holds: newPart(reads / 4), fragments: newPart(reads - reads/4), wait: wait}
}

// admit takes n bytes of part p, waiting up to the budget's wait; errBusy
// once it has waited that long, ctx's error when ctx ends first.
func (b *budget) admit(ctx context.Context, p *part, n int64) (release func(), err error) {
	n = p.clamp(n)
	if !p.sem.TryAcquire(n) {
		wctx, cancel := context.WithTimeout(ctx, b.wait)
		defer cancel()
		if err := p.sem.Acquire(wctx, n); err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return nil, errBusy
		}
	}
	return func() { p.sem.Release(n) }, nil
}

// write admits a write of n bytes: in the writes part, or, when that is
// full, in the fragments part if it has room now (no waiting there).
func (b *budget) write(ctx context.Context, n int64) (release func(), err error) {
	if w := b.writes.clamp(n); b.writes.sem.TryAcquire(w) {
		return func() { b.writes.sem.Release(w) }, nil
	}
	if f := max(n, 1); f <= b.fragments.size && b.fragments.sem.TryAcquire(f) {
		return func() { b.fragments.sem.Release(f) }, nil
	}
	return b.admit(ctx, b.writes, n)
}

// scanMemory is the table.Memory of one request's scans: its fragments
// part of the budget. The request's first reservation is its admission
// (up to BusyWait, then errBusy); the later ones wait.
type scanMemory struct {
	b        *budget
	admitted atomic.Bool
}

func (m *scanMemory) Reserve(ctx context.Context, n int64) error {
	p := m.b.fragments
	if !m.admitted.Load() {
		if _, err := m.b.admit(ctx, p, n); err != nil {
			return err
		}
		m.admitted.Store(true)
		return nil
	}
	return p.sem.Acquire(ctx, p.clamp(n))
}

func (m *scanMemory) Release(n int64) { m.b.fragments.sem.Release(m.b.fragments.clamp(n)) }

// holds is what one read request holds of the holds part from its
// start to its end (and, as a table.Memory, ScanOptions.Hold): each
// reservation an admission. A request is granted at most the whole part,
// however much it asks for in all: what it asks past that is granted
// without being taken, so that a request already holding some of the part
// is not refused more it could never get.
type holds struct {
	b  *budget
	mu sync.Mutex // serializes the request's reservations
	// asked is the sum of the reservations held; granted, what they
	// took of the part: min(asked, the part's size).
	asked, granted int64
}

func (b *budget) newHolds() *holds { return &holds{b: b} }

func (h *holds) Reserve(ctx context.Context, n int64) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	p := h.b.holds
	if more := min(h.asked+n, p.size) - h.granted; more > 0 {
		if _, err := h.b.admit(ctx, p, more); err != nil {
			return err
		}
		h.granted += more
	}
	h.asked += n
	return nil
}

func (h *holds) Release(n int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.asked -= n
	if keep := min(h.asked, h.b.holds.size); keep < h.granted {
		h.b.holds.sem.Release(h.granted - keep)
		h.granted = keep
	}
}

// hold reserves n bytes for the request; release gives them back.
func (h *holds) hold(ctx context.Context, n int64) (release func(), err error) {
	if err := h.Reserve(ctx, n); err != nil {
		return nil, err
	}
	return func() { h.Release(n) }, nil
}
