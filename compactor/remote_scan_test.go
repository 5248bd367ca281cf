package compactor_test

import (
	"context"
	"io"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/compactor"
	"github.com/stratadb/strata/table"
)

// slowRanges holds each ranged read 10 ms, as a remote store's round trip
// does, and records how many were in flight at once.
type slowRanges struct {
	blob.Bucket
	inFlight, most atomic.Int64
}

func (s *slowRanges) NewRangeReader(ctx context.Context, key string, off, n int64) (io.ReadCloser, error) {
	now := s.inFlight.Add(1)
	defer s.inFlight.Add(-1)
	for {
		m := s.most.Load()
		if now <= m || s.most.CompareAndSwap(m, now) {
			break
		}
	}
	time.Sleep(10 * time.Millisecond)
	return s.Bucket.NewRangeReader(ctx, key, off, n)
}

// A large fragment read by ranges fetches the column chunks of a row group
// together: a scan pays a round trip per row group, not per column chunk,
// and reads every row once.
func TestVolumeALargeFragmentsColumnsAreReadTogether(t *testing.T) {
	b := rolloutsTable(t, "mem://", 0, 100, 400) // 40,000 rows
	if _, err := compactor.Compact(ctx, b, &compactor.Policy{}, nil); err != nil {
		t.Fatal(err)
	}
	slow := &slowRanges{Bucket: b}
	s, err := table.Open(ctx, slow, nil)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(s.Manifest().Fragments); n != 1 {
		t.Fatalf("%d fragments after compaction, want 1", n)
	}
	var rows int64
	for rec, err := range s.Scan(ctx, table.ScanOptions{}) {
		if err != nil {
			t.Fatal(err)
		}
		rows += rec.NumRows()
	}
	if rows != 40_000 {
		t.Fatalf("scanned %d rows, want 40,000", rows)
	}
	if most := slow.most.Load(); most < 4 {
		t.Fatalf("at most %d ranged reads were in flight at once; the columns of a row group should be read together", most)
	}
}
