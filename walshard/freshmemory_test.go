package walshard_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/stratadb/strata/table"
	"github.com/stratadb/strata/walshard"
)

var errRefused = errors.New("refused")

// holding is a table.Memory that records what it holds, and refuses a
// reservation that would take it past limit (0: none).
type holding struct {
	mu          sync.Mutex
	limit       int64
	held, peak  int64
	reservation int
}

func (h *holding) Reserve(_ context.Context, n int64) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.limit > 0 && h.held+n > h.limit {
		return errRefused
	}
	h.held += n
	h.peak = max(h.peak, h.held)
	h.reservation++
	return nil
}

func (h *holding) Release(n int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.held -= n
}

// A fresh read reserves from its Hold, for each WAL entry it keeps, twice
// the entry's object while it decodes it, and its rows until the read
// ends, when it gives them back; a Hold that refuses fails the read with
// its error, holding nothing after.
func TestAFreshReadHoldsItsWALRowsWithinItsBudget(t *testing.T) {
	b := threeEntries(t)
	h := &holding{}
	seen := countIDs(t, walshard.ScanFleet(ctx, b, table.ScanOptions{Hold: h}))
	if len(seen) != 6 || h.reservation < 6 || h.peak < 6*8 || h.held != 0 {
		t.Fatalf("a fresh read of 6 rows in 3 entries: %d rows, %d reservations, at most %d bytes held, %d still", len(seen), h.reservation, h.peak, h.held)
	}
	refusing := &holding{limit: h.peak - 1}
	var got error
	for _, err := range walshard.ScanFleet(ctx, b, table.ScanOptions{Hold: refusing}) {
		if err != nil {
			got = err
		}
	}
	if !errors.Is(got, errRefused) || refusing.held != 0 {
		t.Fatalf("a fresh read past its Hold: %v, %d bytes still held", got, refusing.held)
	}
}
