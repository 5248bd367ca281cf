package walshard_test

import (
	"context"
	"errors"
	"regexp"
	"testing"
	"time"

	"github.com/stratadb/strata/blob/fault"
	"github.com/stratadb/strata/table"
	"github.com/stratadb/strata/table/format"
	"github.com/stratadb/strata/walshard"
)

// When flushes cannot keep up (here: the store refuses flush objects,
// once the shard is open), appends wait once the memtable passes its
// bound, instead of growing memory; they go on once flushes succeed
// again.
func TestAppendsWaitWhenTheMemtableIsFull(t *testing.T) {
	under := newTable(t, "mem://")
	f := fault.Wrap(under, nil)
	s := open(t, f, "w1", walshard.Options{MaxMemtableBytes: 2000, FlushBytes: 1 << 30})
	defer s.Close()
	f.SetInjector(fault.OnKeys(regexp.MustCompile(`^`+format.FleetFlushDir), fault.Always(fault.Fault{Action: fault.Fail})))
	for i := range 200 { // 16 bytes of ids a row, plus the shard names
		appendIDs(t, s, int64(i))
		if s.Stats().MemtableBytes > 2000 {
			break
		}
	}
	rec := batch("w1", 1000)
	defer rec.Release()
	c, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	if err := s.Append(c, rec); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("append over a full memtable: %v, want it to wait until the deadline", err)
	}
	f.SetInjector(nil) // flushes work again
	c2, cancel2 := context.WithTimeout(ctx, 10*time.Second)
	defer cancel2()
	if err := s.Append(c2, rec); err != nil {
		t.Fatalf("append once flushes work: %v", err)
	}
	if st := s.Stats(); st.PendingGenerations == 0 {
		t.Fatalf("no generation was flushed: %+v", st)
	}
	got := countIDs(t, s.ScanFresh(ctx, table.ScanOptions{}))
	if got[1000] != 1 || got[0] != 1 {
		t.Fatalf("fresh read after backpressure: %d rows", len(got))
	}
}
