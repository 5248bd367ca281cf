package walshard_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/blob/fault"
	"github.com/stratadb/strata/table"
	"github.com/stratadb/strata/walshard"
)

// script appends batches of three ids, flushing every second append and
// merging every fourth, until the first error; it returns the acknowledged
// ids and every id it tried.
func script(s *walshard.Shard) (acked, tried []int64, err error) {
	for a := range 12 {
		ids := seq(int64(a*3), 3)
		tried = append(tried, ids...)
		rec := batch("w1", ids...)
		err = s.Append(context.Background(), rec)
		rec.Release()
		if err != nil {
			return acked, tried, fmt.Errorf("append %d: %w", a, err)
		}
		acked = append(acked, ids...)
		if a%2 == 1 {
			if _, err = s.Flush(context.Background()); err != nil {
				return acked, tried, fmt.Errorf("flush after append %d: %w", a, err)
			}
		}
		if a%4 == 3 {
			if _, err = s.Merge(context.Background()); err != nil {
				return acked, tried, fmt.Errorf("merge after append %d: %w", a, err)
			}
		}
	}
	return acked, tried, nil
}

// recoverAndCheck reopens the shard on the undamaged store, flushes and
// merges, and checks: every acknowledged id exactly once, any other tried
// id at most once, nothing else.
func recoverAndCheck(t *testing.T, under blob.Bucket, acked, tried []int64, what string) {
	t.Helper()
	s, err := walshard.Open(ctx, under, &walshard.Options{Shard: "w1"})
	if err != nil {
		t.Fatalf("%s: reopen: %v", what, err)
	}
	defer s.Close()
	fresh := countIDs(t, s.ScanFresh(ctx, table.ScanOptions{}))
	if _, err := s.Flush(ctx); err != nil {
		t.Fatalf("%s: flush: %v", what, err)
	}
	if _, err := s.Merge(ctx); err != nil {
		t.Fatalf("%s: merge: %v", what, err)
	}
	base := baseIDs(t, under)
	for name, seen := range map[string]map[int64]int{"fresh read": fresh, "base table": base} {
		for _, id := range acked {
			if seen[id] != 1 {
				t.Fatalf("%s: %s: acknowledged id %d seen %d times", what, name, id, seen[id])
			}
		}
		triedSet := map[int64]bool{}
		for _, id := range tried {
			triedSet[id] = true
		}
		for id, n := range seen {
			if !triedSet[id] || n != 1 {
				t.Fatalf("%s: %s: id %d seen %d times (tried: %v)", what, name, id, n, triedSet[id])
			}
		}
	}
}

// Crash after N requests, for every N through the whole script: appends,
// flushes, merges and cleanups are all cut somewhere. A second sweep makes
// request N land but lose its response before the crash.
// The owner that crashes may write WAL entries as fragments (ReuseBytes);
// the one that recovers reads them with the option off.
func TestVolumeCrashAtEveryPointLosesAndDoublesNothing(t *testing.T) {
	for _, reuse := range []int64{0, 1} {
		t.Run(fmt.Sprintf("reuse=%d", reuse), func(t *testing.T) { crashAtEveryPoint(t, reuse) })
	}
}

func crashAtEveryPoint(t *testing.T, reuse int64) {
	total := 0
	{
		under := newTable(t, "mem://")
		f := fault.Wrap(under, nil)
		s := open(t, f, "w1", walshard.Options{ReuseBytes: reuse})
		if _, _, err := script(s); err != nil {
			t.Fatal(err)
		}
		s.Close()
		total = int(f.Requests())
	}
	t.Logf("the script makes %d requests; crashing after each", total)
	for _, lose := range []bool{false, true} {
		for n := 1; n <= total; n++ {
			what := fmt.Sprintf("crash after %d requests (lost response: %v)", n, lose)
			under := newTable(t, "mem://")
			inj := fault.CrashAfter(int64(n))
			if lose {
				inj = fault.Any(fault.AfterN(int64(n), fault.Always(fault.Fault{Action: fault.Crash})),
					fault.Nth(int64(n), fault.Always(fault.Fault{Action: fault.LoseResponse})))
			}
			f := fault.Wrap(under, inj)
			var acked, tried []int64
			s, err := walshard.Open(ctx, f, &walshard.Options{Shard: "w1", ReuseBytes: reuse})
			if err == nil {
				acked, tried, err = script(s)
				s.Close()
			}
			if err == nil {
				continue // the script finished before the crash point
			}
			if !errors.Is(err, fault.ErrCrashed) && !errors.Is(err, fault.ErrInjected) && !errors.Is(err, walshard.ErrFenced) {
				t.Fatalf("%s: unexpected error %v", what, err)
			}
			recoverAndCheck(t, under, acked, tried, what)
		}
	}
}
