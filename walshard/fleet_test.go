package walshard_test

import (
	"bytes"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/blob/fault"
	"github.com/stratadb/strata/commit"
	"github.com/stratadb/strata/compactor"
	"github.com/stratadb/strata/table"
	"github.com/stratadb/strata/table/evolve"
	"github.com/stratadb/strata/table/format"
	"github.com/stratadb/strata/walshard"
	"github.com/stratadb/strata/walshard/fleetmerge"
)

// Many shards' flushed generations go into the table in one commit, each
// shard's watermark moving in it; the owners learn the new watermark at
// their next flush (recorded at a multiple of sixteen generations) and clean
// their logs; a second pass adds what they flushed since, and nothing
// twice.
func TestFleetMergeCommitsManyShardsOnce(t *testing.T) {
	b := newTable(t, "mem://")
	var shards []*walshard.Shard
	var want []int64
	var later atomic.Int64 // how far the owners' clocks are moved on
	clock := func() time.Time { return time.Now().Add(time.Duration(later.Load())) }
	for i := range 8 {
		s := open(t, b, fmt.Sprintf("w%d", i), walshard.Options{Commit: commit.Options{Now: clock}})
		defer s.Close()
		for g := range 16 {
			ids := seq(int64(i*1000+g*10), 5)
			appendIDs(t, s, ids...)
			want = append(want, ids...)
			if _, err := s.Flush(ctx); err != nil {
				t.Fatal(err)
			}
		}
		shards = append(shards, s)
	}
	before, err := table.LatestVersion(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	fo := &fleetmerge.Options{Memory: &fleetmerge.Memory{}}
	res, err := fleetmerge.Merge(ctx, b, fo)
	if err != nil || res.Shards != 8 || res.Generations != 128 || res.Rows != 640 {
		t.Fatalf("fleet merge: %+v %v", res, err)
	}
	if after, _ := table.LatestVersion(ctx, b); after != before+1 {
		t.Fatalf("one pass made %d commits", after-before)
	}
	exactlyOnce(t, baseIDs(t, b), want)
	// Nothing new now: a LIST of flush objects, nothing else (the pass
	// before remembers what it merged, and that it found no announcement
	// of an older build, which it looks for again a minute later).
	c0, _ := blob.StatsOf(b)
	if res, err := fleetmerge.Merge(ctx, b, fo); err != nil || res.Version != 0 {
		t.Fatalf("idle pass: %+v %v", res, err)
	}
	if c1, _ := blob.StatsOf(b); c1.Sub(c0).Requests() != 1 {
		t.Fatalf("an idle fleet merge made %d requests", c1.Sub(c0).Requests())
	}
	// The owners go on, and a flush two minutes after the last one that
	// read the shard's merge record reads it again; one owner merges on
	// its own while a pass runs.
	later.Store(int64(2*time.Minute + time.Second))
	for i, s := range shards {
		ids := seq(int64(i*1000+500), 3)
		appendIDs(t, s, ids...)
		want = append(want, ids...)
		if _, err := s.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		if st := s.Stats(); st.Watermark != 16 || st.PendingGenerations != 1 {
			t.Fatalf("shard %d after a fleet merge and a flush: %+v", i, st)
		}
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		if _, err := shards[3].Merge(ctx); err != nil {
			t.Error(err)
		}
	})
	wg.Go(func() {
		if _, err := fleetmerge.Merge(ctx, b, nil); err != nil {
			t.Error(err)
		}
	})
	wg.Wait()
	if _, err := fleetmerge.Merge(ctx, b, nil); err != nil {
		t.Fatal(err)
	}
	exactlyOnce(t, baseIDs(t, b), want)
	for _, s := range shards {
		if err := s.Drain(ctx); err != nil {
			t.Fatal(err)
		}
	}
	exactlyOnce(t, baseIDs(t, b), want)
	for o, err := range blob.List(ctx, b, format.FleetPendingDir, 0) {
		if err != nil {
			t.Fatal(err)
		}
		t.Fatalf("announcement %s left after every generation merged", o.Key)
	}
}

// Two fleet merges over the same generations at once: one adds them, the
// other finds nothing left; a shard fenced by a newer owner is left to it.
func TestTwoFleetMergesAtOnceAddEachGenerationOnce(t *testing.T) {
	b := newTable(t, "mem://")
	var want []int64
	for i := range 6 {
		s := open(t, b, fmt.Sprintf("w%d", i), walshard.Options{})
		for g := range 3 {
			ids := seq(int64(i*100+g*10), 4)
			appendIDs(t, s, ids...)
			want = append(want, ids...)
			if _, err := s.Flush(ctx); err != nil {
				t.Fatal(err)
			}
		}
		s.Close()
	}
	var wg sync.WaitGroup
	for range 3 {
		wg.Go(func() {
			if _, err := fleetmerge.Merge(ctx, b, &fleetmerge.Options{MaxGenerations: 2}); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	for {
		res, err := fleetmerge.Merge(ctx, b, nil)
		if err != nil {
			t.Fatal(err)
		}
		if res.Version == 0 {
			break
		}
	}
	exactlyOnce(t, baseIDs(t, b), want)
}

// A worker dies for good with rows acknowledged and not flushed. Once it
// has been quiet past the adoption age, the shard is found and adopted:
// every acknowledged row reaches the table. The worker then comes back
// under the same name: nothing lost, nothing twice.
func TestAnAbandonedShardIsAdopted(t *testing.T) {
	b := newTable(t, "mem://")
	dead := open(t, b, "pod-7", walshard.Options{})
	appendIDs(t, dead, 1, 2, 3)
	if _, err := dead.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	appendIDs(t, dead, 4, 5)
	// (the process is gone: nothing more from it)
	live := open(t, b, "pod-8", walshard.Options{})
	defer live.Close()
	appendIDs(t, live, 10)
	if found, err := walshard.FindAbandoned(ctx, b, time.Hour, time.Now()); err != nil || len(found) != 0 {
		t.Fatalf("before the adoption age: %+v %v", found, err)
	}
	found, err := walshard.FindAbandoned(ctx, b, time.Minute, time.Now().Add(2*time.Minute))
	if err != nil || len(found) != 2 {
		t.Fatalf("past the adoption age: %+v %v", found, err)
	}
	res, err := walshard.Adopt(ctx, b, "pod-7", &walshard.Options{})
	if err != nil || res.Rows != 2 || res.Generations != 2 {
		t.Fatalf("adopt: %+v %v", res, err)
	}
	exactlyOnce(t, baseIDs(t, b), []int64{1, 2, 3, 4, 5})
	if err := appendOnce(dead, "pod-7", 99); !errors.Is(err, walshard.ErrFenced) {
		t.Fatalf("the old owner after adoption: %v", err)
	}
	dead.Close()
	back := open(t, b, "pod-7", walshard.Options{})
	appendIDs(t, back, 6)
	if err := back.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	back.Close()
	if found, err := walshard.FindAbandoned(ctx, b, time.Minute, time.Now().Add(2*time.Minute)); err != nil || len(found) != 1 || found[0].Shard != "pod-8" {
		t.Fatalf("after the adoption: %+v %v", found, err)
	}
	exactlyOnce(t, baseIDs(t, b), []int64{1, 2, 3, 4, 5, 6})
}

// A fresh read of the fleet sees every acknowledged row once: merged,
// flushed and awaiting a merge, or only in a WAL; while owners and fleet
// merges move rows from one to the next.
func TestAFleetFreshReadSeesEveryAcknowledgedRowOnce(t *testing.T) {
	b := newTable(t, "mem://")
	var mu sync.Mutex
	var acked []int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			s := open(t, b, fmt.Sprintf("w%d", w), walshard.Options{})
			defer s.Close()
			for i := int64(0); ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				id := int64(w)*1_000_000 + i
				if err := appendOnce(s, "x", id); err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				acked = append(acked, id)
				mu.Unlock()
				switch i % 7 {
				case 3:
					_, _ = s.Flush(ctx)
				case 6:
					_, _ = s.Merge(ctx)
				}
			}
		})
	}
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := fleetmerge.Merge(ctx, b, nil); err != nil {
				t.Error(err)
			}
			if _, err := compactor.Compact(ctx, b, &compactor.Policy{MinFragments: 4}, nil); err != nil {
				t.Error(err)
			}
		}
	})
	for range 15 {
		time.Sleep(50 * time.Millisecond) // appends, flushes and merges go on
		mu.Lock()
		before := append([]int64(nil), acked...)
		mu.Unlock()
		seen := countIDs(t, walshard.ScanFleet(ctx, b, table.ScanOptions{}))
		for _, id := range before {
			if seen[id] != 1 {
				close(stop)
				wg.Wait()
				t.Fatalf("acknowledged id %d seen %d times by a fresh read", id, seen[id])
			}
		}
		for id, n := range seen {
			if n != 1 {
				close(stop)
				wg.Wait()
				t.Fatalf("id %d seen %d times", id, n)
			}
		}
	}
	close(stop)
	wg.Wait()
	if len(acked) < 50 {
		t.Fatalf("only %d appends", len(acked))
	}
	t.Logf("15 fresh reads while 4 shards acknowledged %d rows, with fleet merges and compactions", len(acked))
}

// A flush object a fleet merge cannot read (here: the store fails every
// read of the older of one shard's two awaiting a merge) holds back that
// shard alone: the others are merged, the shard is named among the
// failed, and merged once it reads again.
func TestAFlushObjectThatCannotBeReadHoldsBackItsShardAlone(t *testing.T) {
	under := newTable(t, "mem://")
	b := fault.Wrap(under, nil)
	var want []int64
	for i, id := range []string{"w1", "w2", "w3"} {
		s := open(t, b, id, walshard.Options{})
		defer s.Close()
		for f := range 2 {
			ids := seq(int64(i*100+f*10), 5)
			appendIDs(t, s, ids...)
			want = append(want, ids...)
			if _, err := s.Flush(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	// Seq 1 is the open's state; 2 and 3 the flushes'.
	b.SetInjector(fault.OnKeys(regexp.MustCompile(`^`+regexp.QuoteMeta(format.FlushKey("w2", 2))), fault.OnOps(fault.Always(fault.Fault{Action: fault.Fail}), fault.OpGet)))
	res, err := fleetmerge.Merge(ctx, b, nil)
	if err == nil || !slices.Equal(res.Failed, []string{"w2"}) || res.Shards != 2 {
		t.Fatalf("fleet merge with one of w2's flush objects unreadable: %+v %v", res, err)
	}
	exactlyOnce(t, baseIDs(t, under), append(append(seq(0, 5), seq(10, 5)...), append(seq(200, 5), seq(210, 5)...)...))
	b.SetInjector(nil)
	if res, err := fleetmerge.Merge(ctx, b, nil); err != nil || res.Shards != 1 {
		t.Fatalf("fleet merge once w2 reads again: %+v %v", res, err)
	}
	exactlyOnce(t, baseIDs(t, under), want)
}

// So does a damaged one: its rows do not decode, and the error names it.
func TestADamagedFlushObjectHoldsBackItsShardAlone(t *testing.T) {
	b := newTable(t, "mem://")
	for i, id := range []string{"w1", "w2"} {
		s := open(t, b, id, walshard.Options{})
		defer s.Close()
		for f := range 2 {
			ids := seq(int64(i*100+f*10), 5)
			appendIDs(t, s, ids...)
			if _, err := s.Flush(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	key := format.FlushKey("w2", 2)
	data, err := b.Get(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	// In the first page, just after the leading magic: the footer that
	// says where the pages are (a third or more of a small object) stays
	// whole.
	data[8] ^= 0xff
	data[9] ^= 0xff
	if err := b.Put(ctx, key, bytes.NewReader(data)); err != nil {
		t.Fatal(err)
	}
	res, err := fleetmerge.Merge(ctx, b, nil)
	if err == nil || !slices.Equal(res.Failed, []string{"w2"}) || res.Shards != 1 || !strings.Contains(err.Error(), key) {
		t.Fatalf("fleet merge with one of w2's flush objects damaged: %+v %v", res, err)
	}
	exactlyOnce(t, baseIDs(t, b), append(seq(0, 5), seq(10, 5)...)) // w1's
}

// A fleet merge copies the pages of flush objects written under the
// table's schema, and decodes those flushed before a column was added:
// their rows join the table as the new schema reads them, every one
// once, in the same fragment as the others'.
func TestAFleetMergeDecodesFlushObjectsOfAnOlderSchema(t *testing.T) {
	b := newTable(t, "mem://")
	old := open(t, b, "w1", walshard.Options{})
	defer old.Close()
	appendIDs(t, old, seq(0, 4)...)
	if _, err := old.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	tb, err := commit.OpenTable(ctx, b, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tb.Alter(ctx, evolve.ColumnChange{Op: evolve.AddColumn, Column: "grade", Type: arrow.PrimitiveTypes.Int64}); err != nil {
		t.Fatal(err)
	}
	res, err := fleetmerge.Merge(ctx, b, nil)
	if err != nil || res.Generations != 1 {
		t.Fatalf("fleet merge over a flush object of the older schema: %+v %v", res, err)
	}
	m, err := table.ReadLatest(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	last := m.Fragments[len(m.Fragments)-1]
	if last.SchemaID != evolve.SchemaID(m.Schema()) || len(last.Columns) != m.Schema().NumFields() {
		t.Fatalf("the merged fragment: schema %d with %d column statistics, want the table's %d with %d", last.SchemaID, len(last.Columns), evolve.SchemaID(m.Schema()), m.Schema().NumFields())
	}
	exactlyOnce(t, baseIDs(t, b), seq(0, 4))
}
