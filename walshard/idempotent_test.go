package walshard_test

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/blob/fault"
	"github.com/stratadb/strata/table"
	"github.com/stratadb/strata/table/format"
	"github.com/stratadb/strata/walshard"
)

// Promises of Shard.AppendOnce, pinned here:
//   - an append sent again under its name stores nothing and answers the
//     first one's WAL position, before and after a flush, a merge, a
//     reopening and an adoption (TestAnAppendSentAgainIsStoredOnceWhateverHappenedSince);
//   - the same name with other rows is refused (same test);
//   - attempts of one append racing in one process store it once
//     (TestRacingAttemptsOfOneAppendInAShardStoreItOnce);
//   - retries of every append cut by a crash at any request, sent to
//     the recovered shard, store each append exactly once
//     (TestVolumeRetriesAfterACrashAtEveryPointStoreEachAppendOnce);
//   - an earlier attempt whose outcome was unknown and that landed is
//     found, not written again (TestAnAttemptWhoseOutcomeWasUnknownIsNotWrittenTwice).

var walKeys = regexp.MustCompile(`/wal/`)

func keyed(s *walshard.Shard, producer string, seq uint64, ids ...int64) (walshard.Ack, error) {
	rec := batch("w1", ids...)
	defer rec.Release()
	return s.AppendOnce(ctx, format.Idempotency{Producer: producer, Seq: seq}, rec)
}

func mustKeyed(t *testing.T, s *walshard.Shard, producer string, seq uint64, ids ...int64) walshard.Ack {
	t.Helper()
	ack, err := keyed(s, producer, seq, ids...)
	if err != nil {
		t.Fatalf("append %v as %s/%d: %v", ids, producer, seq, err)
	}
	return ack
}

func TestAnAppendSentAgainIsStoredOnceWhateverHappenedSince(t *testing.T) {
	b := newTable(t, "mem://")
	s := open(t, b, "w1", walshard.Options{})
	first := mustKeyed(t, s, "client", 1, 1, 2)
	if first.Duplicate || first.Position == 0 || first.Rows != 2 {
		t.Fatalf("first append: %+v", first)
	}
	check := func(when string, s *walshard.Shard) {
		t.Helper()
		ack := mustKeyed(t, s, "client", 1, 1, 2)
		if !ack.Duplicate || ack.Position != first.Position || ack.Rows != 2 {
			t.Fatalf("%s: %+v, want a duplicate at position %d", when, ack, first.Position)
		}
		if _, err := keyed(s, "client", 1, 3); !errors.Is(err, format.ErrKeyReused) {
			t.Fatalf("%s: other rows under the name: %v, want ErrKeyReused", when, err)
		}
	}
	check("at once", s)
	mustKeyed(t, s, "client", 2, 3)
	s.Close()
	s = open(t, b, "w1", walshard.Options{}) // replayed from the WAL
	check("after a reopening", s)
	if _, err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	check("after a flush", s)
	if _, err := s.Merge(ctx); err != nil {
		t.Fatal(err)
	}
	check("after a merge", s)
	s.Close()
	s = open(t, b, "w1", walshard.Options{}) // from the state: the WAL is cleaned up
	check("after a merge and a reopening", s)
	mustKeyed(t, s, "client", 3, 4)
	s.Close()
	if _, err := walshard.Adopt(ctx, b, "w1", &walshard.Options{}); err != nil {
		t.Fatal(err)
	}
	s = open(t, b, "w1", walshard.Options{})
	defer s.Close()
	check("after an adoption", s)
	if got := baseIDs(t, b); len(got) != 4 || got[1] != 1 || got[2] != 1 || got[3] != 1 || got[4] != 1 {
		t.Fatalf("table holds %v, want ids 1–4 once", got)
	}
}

func TestRacingAttemptsOfOneAppendInAShardStoreItOnce(t *testing.T) {
	b := newTable(t, "mem://")
	s := open(t, b, "w1", walshard.Options{GroupWait: time.Millisecond})
	defer s.Close()
	const rounds, racers = 30, 4
	for r := range rounds {
		acks := make([]walshard.Ack, racers)
		var wg sync.WaitGroup
		for i := range racers {
			wg.Go(func() { acks[i] = mustKeyed(t, s, "racer", uint64(r), int64(r)) })
		}
		wg.Wait()
		stored := 0
		for _, a := range acks {
			if a.Position != acks[0].Position {
				t.Fatalf("round %d: positions %+v differ", r, acks)
			}
			if !a.Duplicate {
				stored++
			}
		}
		if stored != 1 {
			t.Fatalf("round %d: %d attempts stored the rows", r, stored)
		}
	}
	exactlyOnce(t, countIDs(t, s.ScanFresh(ctx, table.ScanOptions{})), seq(0, rounds))
}

// keyedScript is script with idempotent appends (producer "w1", the
// append's number): it returns the appends tried, by number.
func keyedScript(s *walshard.Shard) (tried int, err error) {
	for a := range 12 {
		tried = a + 1
		if _, err = keyed(s, "w1", uint64(a), seq(int64(a*3), 3)...); err != nil {
			return tried, fmt.Errorf("append %d: %w", a, err)
		}
		if a%2 == 1 {
			if _, err = s.Flush(context.Background()); err != nil {
				return tried, fmt.Errorf("flush after append %d: %w", a, err)
			}
		}
		if a%4 == 3 {
			if _, err = s.Merge(context.Background()); err != nil {
				return tried, fmt.Errorf("merge after append %d: %w", a, err)
			}
		}
	}
	return tried, nil
}

// Crash after N requests, for every N through the keyed script, and
// again with request N's response lost; then send every append tried
// again to the recovered shard, as a client that never heard back would.
// Every one is then stored exactly once — without names the same retries
// double the appends that had landed.
func TestVolumeRetriesAfterACrashAtEveryPointStoreEachAppendOnce(t *testing.T) {
	total := 0
	{
		under := newTable(t, "mem://")
		f := fault.Wrap(under, nil)
		s := open(t, f, "w1", walshard.Options{})
		if _, err := keyedScript(s); err != nil {
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
			tried := 0
			s, err := walshard.Open(ctx, f, &walshard.Options{Shard: "w1"})
			if err == nil {
				tried, err = keyedScript(s)
				s.Close()
			}
			if err == nil {
				continue
			}
			retryAndCheck(t, under, tried, what)
		}
	}
}

// retryAndCheck reopens the shard on the undamaged store, sends the last
// appends tried again under their names (as many as a producer's record
// keeps: the last one was not acknowledged, the others were), merges, and
// checks that the table holds each append exactly once.
func retryAndCheck(t *testing.T, under blob.Bucket, tried int, what string) {
	t.Helper()
	s, err := walshard.Open(ctx, under, &walshard.Options{Shard: "w1"})
	if err != nil {
		t.Fatalf("%s: reopen: %v", what, err)
	}
	defer s.Close()
	for a := max(0, tried-format.RecentSeqs); a < tried; a++ {
		if _, err := keyed(s, "w1", uint64(a), seq(int64(a*3), 3)...); err != nil {
			t.Fatalf("%s: append %d sent again: %v", what, a, err)
		}
	}
	if _, err := s.Flush(ctx); err != nil {
		t.Fatalf("%s: flush: %v", what, err)
	}
	if _, err := s.Merge(ctx); err != nil {
		t.Fatalf("%s: merge: %v", what, err)
	}
	seen := baseIDs(t, under)
	want := seq(0, int64(tried*3))
	for _, id := range want {
		if seen[id] != 1 {
			t.Fatalf("%s: id %d stored %d times", what, id, seen[id])
		}
	}
	if len(seen) != len(want) {
		t.Fatalf("%s: %d ids stored, want %d", what, len(seen), len(want))
	}
}

// An append whose WAL create got no answer and whose re-reads failed
// returns ErrAppendUnknown; its entry landed. The caller sends it again
// under its name through the same handle: the handle finds the entry at
// the position and answers a duplicate, storing nothing more.
func TestAnAttemptWhoseOutcomeWasUnknownIsNotWrittenTwice(t *testing.T) {
	under := newTable(t, "mem://")
	f := fault.Wrap(under, nil)
	s := open(t, f, "w1", walshard.Options{ResolveWithin: -1})
	defer s.Close()
	mustKeyed(t, s, "p", 0, 100)
	wal := fault.OnKeys(walKeys, fault.Any(
		fault.OnOps(fault.Nth(1, fault.Always(fault.Fault{Action: fault.LoseResponse})), fault.OpPutIfAbsent),
		fault.OnOps(fault.Always(fault.Fault{Action: fault.Fail}), fault.OpGet)))
	f.SetInjector(wal)
	if _, err := keyed(s, "p", 1, 101); !errors.Is(err, walshard.ErrAppendUnknown) {
		t.Fatalf("append with its response lost and no read answered: %v, want walshard.ErrAppendUnknown", err)
	}
	f.SetInjector(nil)
	ack := mustKeyed(t, s, "p", 1, 101)
	if !ack.Duplicate {
		t.Fatalf("sent again: %+v, want a duplicate of the landed entry", ack)
	}
	got := countIDs(t, s.ScanFresh(ctx, table.ScanOptions{}))
	ids := slices.Sorted(func(yield func(int64) bool) {
		for id := range got {
			if !yield(id) {
				return
			}
		}
	})
	if !slices.Equal(ids, []int64{100, 101}) || got[101] != 1 {
		t.Fatalf("shard holds %v, want 100 and 101 once", got)
	}
}
