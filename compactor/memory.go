package compactor

import (
	"context"
	"sync"

	"golang.org/x/sync/semaphore"

	"github.com/stratadb/strata/table"
)

// DefaultMemoryBudget is Options.MemoryBudget's default: what a
// compaction holds at once.
const DefaultMemoryBudget = 256 << 20

// MinMemoryBudget is the least memory budget a compaction takes: the row
// group it joins (a quarter of the budget) and a few sources.
const MinMemoryBudget = 16 << 20

// budget is one compaction's memory budget (Options.MemoryBudget), a
// table.Memory: the bin being written holds its share first (hold:
// table.CopyHoldBytes), and its sources reserve the rest, each before it
// is read. A reservation larger than what is left waits for what the
// sources hold to come back; one larger than all the sources may hold is
// granted alone. It counts what is held, and the most held at once
// (Result.PeakMemory).
type budget struct {
	size int64
	sem  *semaphore.Weighted
	mu   struct {
		sync.Mutex
		held, peak int64
		fixed      int64 // what hold took; sources share the rest
	}
}

var _ table.Memory = (*budget)(nil)

func newBudget(size int64) *budget {
	return &budget{size: size, sem: semaphore.NewWeighted(size)}
}

// hold takes n (at most the budget) for as long as a bin is written, no
// source reserving: release gives it back, once no source holds any.
func (m *budget) hold(ctx context.Context, n int64) (release func(), err error) {
	n = min(n, m.size)
	if err := m.sem.Acquire(ctx, n); err != nil {
		return nil, err
	}
	m.count(n)
	m.mu.Lock()
	m.mu.fixed += n
	m.mu.Unlock()
	return func() {
		m.mu.Lock()
		m.mu.fixed -= n
		m.mu.Unlock()
		m.count(-n)
		m.sem.Release(n)
	}, nil
}

// Reserve waits until n more bytes may be held.
func (m *budget) Reserve(ctx context.Context, n int64) error {
	if err := m.sem.Acquire(ctx, m.grant(n)); err != nil {
		return err
	}
	m.count(n)
	return nil
}

// Release gives back n bytes a Reserve granted.
func (m *budget) Release(n int64) {
	m.count(-n)
	m.sem.Release(m.grant(n))
}

// grant is what a reservation of n takes of the semaphore: no more than
// the sources may hold in all, so that a large one is granted alone.
func (m *budget) grant(n int64) int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return min(n, m.size-m.mu.fixed)
}

func (m *budget) count(n int64) {
	m.mu.Lock()
	m.mu.held += n
	m.mu.peak = max(m.mu.peak, m.mu.held)
	m.mu.Unlock()
}

// peak is the most held at once.
func (m *budget) peak() int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.mu.peak
}

// copyShares splits a budget between what a bin's copy holds whatever its
// sources (the row group it joins, a quarter of the budget up to 64 MiB,
// and one source opened ahead) and the read-ahead of one source read by
// ranges (a quarter of the budget, at most readAhead).
func copyShares(size, readAhead int64) (rowGroupBytes, readAheadBytes int64) {
	rowGroupBytes = min(size/4, 64<<20)
	return rowGroupBytes, min(readAhead, size/4)
}
