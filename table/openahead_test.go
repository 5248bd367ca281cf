package table_test

import (
	"context"
	"io"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/table"
)

// slowReads is a bucket whose reads each take a round trip, counting the
// most under way at once.
type slowReads struct {
	blob.Bucket
	now, most atomic.Int64
}

func (s *slowReads) wait() func() {
	n := s.now.Add(1)
	for {
		m := s.most.Load()
		if n <= m || s.most.CompareAndSwap(m, n) {
			break
		}
	}
	time.Sleep(5 * time.Millisecond)
	return func() { s.now.Add(-1) }
}

func (s *slowReads) Get(ctx context.Context, key string) ([]byte, error) {
	defer s.wait()()
	return s.Bucket.Get(ctx, key)
}

func (s *slowReads) NewRangeReader(ctx context.Context, key string, off, n int64) (io.ReadCloser, error) {
	defer s.wait()()
	return s.Bucket.NewRangeReader(ctx, key, off, n)
}

// A scan with a Memory budget opens ahead as many small fragments as
// OpenAheadBytes(Parallelism) holds at their size (a 4 MiB one's worth
// each, otherwise), up to MaxOpenAhead: two fragments' worth of the most
// a fragment holds is twenty small ones under way at once, not two. Each
// still reserves its weight, in order, and every row comes back.
func TestVolumeAScanWithinABudgetOpensSmallFragmentsManyAhead(t *testing.T) {
	counts := make([]int, 40)
	for i := range counts {
		counts[i] = 50
	}
	b, s := rolloutsTable(t, counts...)
	slow := &slowReads{Bucket: b}
	snap := table.NewSnapshot(slow, s.Manifest())
	for _, opts := range []table.ScanOptions{{}, {Columns: []string{"id", "reward"}}} {
		slow.most.Store(0)
		m := newBudget(1 << 40)
		opts.Memory, opts.Parallelism = m, 2
		got, err := scanRows(snap, opts, 0)
		if err != nil || got != 40*50 {
			t.Fatalf("%v: %d rows, %v; want %d", opts.Columns, got, err, 40*50)
		}
		// A fragment read by the spans of its columns makes two reads at
		// once: its footer and a span.
		if most := slow.most.Load(); most < 16 || most > 2*table.MaxOpenAhead {
			t.Errorf("%v: at most %d reads under way at once, want 16 to %d", opts.Columns, most, 2*table.MaxOpenAhead)
		}
		if held, _, grants := m.stats(); held != 0 || len(grants) != 40 {
			t.Errorf("%v: %d reservations, %d bytes still held; want 40, none", opts.Columns, len(grants), held)
		}
	}
}
