package walshard_test

import (
	"context"
	"maps"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/commit"
	"github.com/stratadb/strata/table"
	"github.com/stratadb/strata/table/format"
	"github.com/stratadb/strata/walshard"
	"github.com/stratadb/strata/walshard/fleetmerge"
)

// Promises of names across shards, pinned here: an append sent again to
// another shard (a retry that reached another server) is stored once
// whichever merge installs the copies — the shards' own merges in either
// order (TestARetryOnAnotherShardIsStoredOnce), one fleet merge of both
// (TestARetryOnAnotherShardIsStoredOnceByOneFleetMerge), or a direct
// append and a shard's merge (TestARetryThroughAShardOfADirectAppendIsStoredOnce).

// twoCopies appends, under one name, ids 1 and 2 through w1 and, among
// other rows, through w2; it flushes both.
func twoCopies(t *testing.T) (w1, w2 *walshard.Shard, bk blob.Bucket) {
	t.Helper()
	bk = newTable(t, "mem://")
	w1 = open(t, bk, "w1", walshard.Options{})
	w2 = open(t, bk, "w2", walshard.Options{})
	t.Cleanup(func() { w1.Close(); w2.Close() })
	mustKeyed(t, w1, "client", 1, 1, 2)
	appendIDs(t, w2, 9)
	if ack := mustKeyed(t, w2, "client", 1, 1, 2); ack.Duplicate {
		t.Fatalf("w2 knew w1's name: %+v", ack)
	}
	mustKeyed(t, w2, "client", 2, 3)
	for _, s := range []*walshard.Shard{w1, w2} {
		if _, err := s.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
	return w1, w2, bk
}

func storedOnce(t *testing.T, got map[int64]int) {
	t.Helper()
	if len(got) != 4 || got[1] != 1 || got[2] != 1 || got[3] != 1 || got[9] != 1 {
		t.Fatalf("table holds %v, want ids 1, 2, 3 and 9 once each", got)
	}
}

func TestARetryOnAnotherShardIsStoredOnce(t *testing.T) {
	for _, order := range []string{"first shard first", "second shard first"} {
		t.Run(order, func(t *testing.T) {
			w1, w2, b := twoCopies(t)
			shards := []*walshard.Shard{w1, w2}
			if order == "second shard first" {
				shards = []*walshard.Shard{w2, w1}
			}
			for _, s := range shards {
				if _, err := s.Merge(ctx); err != nil {
					t.Fatal(err)
				}
			}
			storedOnce(t, baseIDs(t, b))
		})
	}
}

func TestARetryOnAnotherShardIsStoredOnceByOneFleetMerge(t *testing.T) {
	_, _, b := twoCopies(t)
	res, err := fleetmerge.Merge(ctx, b, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Shards != 2 {
		t.Fatalf("fleet merge: %+v, want both shards", res)
	}
	storedOnce(t, baseIDs(t, b))
}

func TestARetryThroughAShardOfADirectAppendIsStoredOnce(t *testing.T) {
	b := newTable(t, "mem://")
	tb, err := commit.OpenTable(ctx, b, nil)
	if err != nil {
		t.Fatal(err)
	}
	rec := batch("w1", 1, 2)
	defer rec.Release()
	if _, err := tb.AppendOnce(ctx, format.Idempotency{Producer: "client", Seq: 1}, rec); err != nil {
		t.Fatal(err)
	}
	s := open(t, b, "w1", walshard.Options{})
	defer s.Close()
	mustKeyed(t, s, "client", 1, 1, 2)
	mustKeyed(t, s, "client", 2, 3)
	appendIDs(t, s, 9)
	if _, err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Merge(ctx); err != nil {
		t.Fatal(err)
	}
	storedOnce(t, baseIDs(t, b))
	// The merge recorded the names it installed: a direct append sent
	// again under one of them stores nothing.
	rec3 := batch("w1", 3)
	defer rec3.Release()
	res, err := tb.AppendOnce(ctx, format.Idempotency{Producer: "client", Seq: 2}, rec3)
	if err != nil || !res.Duplicate {
		t.Fatalf("direct append of a name a merge installed: %+v, %v; want a duplicate", res, err)
	}
	storedOnce(t, baseIDs(t, b))
}

// A fresh read — of the fleet, or of one shard with the table — shows a
// named append stored by two shards once, at every stage on its way into
// the table: both copies in the WALs, flushed, one of them merged.
func TestAFreshReadShowsARetryOnAnotherShardOnce(t *testing.T) {
	for _, stage := range []string{"in the WALs", "one flushed", "both flushed", "one merged", "one merged, the other flushed"} {
		t.Run(stage, func(t *testing.T) {
			b := newTable(t, "mem://")
			w1 := open(t, b, "w1", walshard.Options{})
			w2 := open(t, b, "w2", walshard.Options{})
			defer w1.Close()
			defer w2.Close()
			mustKeyed(t, w1, "client", 1, 1, 2)
			appendIDs(t, w2, 9)
			mustKeyed(t, w2, "client", 1, 1, 2)
			mustKeyed(t, w2, "client", 2, 3)
			appendIDs(t, w2, 10)
			step := func(err error) {
				t.Helper()
				if err != nil {
					t.Fatal(err)
				}
			}
			switch stage {
			case "one flushed":
				_, err := w2.Flush(ctx)
				step(err)
			case "both flushed":
				_, err := w1.Flush(ctx)
				step(err)
				_, err = w2.Flush(ctx)
				step(err)
			case "one merged":
				_, err := w1.Flush(ctx)
				step(err)
				_, err = w1.Merge(ctx)
				step(err)
			case "one merged, the other flushed":
				_, err := w2.Flush(ctx)
				step(err)
				_, err = w2.Merge(ctx)
				step(err)
				_, err = w1.Flush(ctx)
				step(err)
			}
			all := map[int64]int{1: 1, 2: 1, 3: 1, 9: 1, 10: 1}
			if got := countIDs(t, walshard.ScanFleet(ctx, b, table.ScanOptions{})); !maps.Equal(got, all) {
				t.Fatalf("fleet fresh read: %v, want %v", got, all)
			}
			if got := countIDs(t, w2.ScanFresh(ctx, table.ScanOptions{})); !maps.Equal(got, all) {
				t.Fatalf("w2's fresh read: %v, want %v", got, all)
			}
			got := countIDs(t, w1.ScanFresh(ctx, table.ScanOptions{}))
			if got[1] != 1 || got[2] != 1 {
				t.Fatalf("w1's fresh read: %v, want ids 1 and 2 once", got)
			}
		})
	}
}

// A copy met behind more later appends of its producer than the record
// keeps outcomes of (a client that went on through both servers, every
// other append each, while its retry sat in one's shard) is still stored
// once: by either shard's merge first, by one fleet merge of both, and in
// a fresh read.
func TestARetryMetBehindManyLaterAppendsIsStoredOnce(t *testing.T) {
	later := uint64(4 * format.RecentSeqs)
	for _, how := range []string{"the first shard's merge first", "the retry's shard first", "one fleet merge", "a fresh read"} {
		t.Run(how, func(t *testing.T) {
			b := newTable(t, "mem://")
			w1 := open(t, b, "w1", walshard.Options{})
			w2 := open(t, b, "w2", walshard.Options{})
			defer w1.Close()
			defer w2.Close()
			want := map[int64]int{}
			for seq := uint64(1); seq <= later; seq++ {
				mustKeyed(t, []*walshard.Shard{w2, w1}[seq%2], "client", seq, int64(seq))
				if seq == 3 {
					mustKeyed(t, w2, "client", 3, 3) // its retry, which reached w2
				}
				want[int64(seq)] = 1
			}
			for _, s := range []*walshard.Shard{w1, w2} {
				if _, err := s.Flush(ctx); err != nil {
					t.Fatal(err)
				}
			}
			var got map[int64]int
			switch how {
			case "a fresh read":
				got = countIDs(t, walshard.ScanFleet(ctx, b, table.ScanOptions{}))
			case "one fleet merge":
				if _, err := fleetmerge.Merge(ctx, b, nil); err != nil {
					t.Fatal(err)
				}
				got = baseIDs(t, b)
			default:
				order := []*walshard.Shard{w1, w2}
				if how == "the retry's shard first" {
					order = []*walshard.Shard{w2, w1}
				}
				for _, s := range order {
					if _, err := s.Merge(ctx); err != nil {
						t.Fatal(err)
					}
				}
				got = baseIDs(t, b)
			}
			if !maps.Equal(got, want) {
				t.Fatalf("read %v, want ids 1..%d once each", got, later)
			}
		})
	}
}

// A named upsert sent again to another shard (a retry that reached
// another server) after a later upsert of its key changes nothing when
// that shard's generation is merged — by its owner, by a fleet merge, or
// by an owner that opened the shard again and replayed it — and an
// upsert of the key acknowledged before the copy, flushed with it, stays
// (the generation holds both, Repeats, and the merge copies the one left
// once the copy is dropped).
func TestANamedUpsertOnTwoShardsIsInstalledOnce(t *testing.T) {
	for _, how := range []string{"owner", "fleet", "reopened"} {
		t.Run(how, func(t *testing.T) {
			b := newTable(t, "mem://")
			w1 := open(t, b, "w1", walshard.Options{})
			w2 := open(t, b, "w2", walshard.Options{})
			t.Cleanup(func() { w1.Close(); w2.Close() })
			upsert := func(s *walshard.Shard, name uint64, value string, ids ...int64) {
				t.Helper()
				rec := batch(value, ids...)
				defer rec.Release()
				key := &format.Idempotency{Producer: "client", Seq: name}
				if _, err := s.UpsertOnce(ctx, key, []string{"id"}, false, rec); err != nil {
					t.Fatal(err)
				}
			}
			upsert(w1, 1, "first", 1, 2)
			if err := w1.Drain(ctx); err != nil {
				t.Fatal(err)
			}
			upsert(w1, 2, "later", 1)
			if err := w1.Drain(ctx); err != nil {
				t.Fatal(err)
			}
			upsert(w2, 3, "before", 2, 3)
			upsert(w2, 1, "first", 1, 2) // the copy of name 1
			upsert(w2, 4, "after", 4)
			upsert(w2, 5, "once", 5)
			upsert(w2, 6, "twice", 5) // the generation holds key 5 twice, the last to stay
			if how == "reopened" {
				w2.Close()
				w2 = open(t, b, "w2", walshard.Options{})
			}
			want := map[int64]string{1: "later", 2: "before", 3: "before", 4: "after", 5: "twice"}
			wantRows(t, "a fresh read", rowsByID(t, func(o table.ScanOptions) func(func(arrow.RecordBatch, error) bool) {
				return walshard.ScanFleet(ctx, b, o)
			}), want)
			if _, err := w2.Flush(ctx); err != nil {
				t.Fatal(err)
			}
			// Flushed together, the copy and the upsert before it of the
			// same key are both in the generation; a fresh read shows the
			// one the merge will install.
			wantRows(t, "a fresh read after the flush", rowsByID(t, func(o table.ScanOptions) func(func(arrow.RecordBatch, error) bool) {
				return walshard.ScanFleet(ctx, b, o)
			}), want)
			if how == "fleet" {
				if _, err := fleetmerge.Merge(ctx, b, nil); err != nil {
					t.Fatal(err)
				}
			}
			if err := w2.Drain(ctx); err != nil {
				t.Fatal(err)
			}
			wantRows(t, "the table", tableRows(t, b), want)
		})
	}
}

// A merge that drops a copy of a named append by a vector on the fragment
// it adds, and stalls past garbage collection's safety age before it
// lands while the collector takes the vector (an orphan then), writes the
// vector again once it landed: the table reads each row once.
func TestAMergeThatStalledWritesAgainTheVectorGCTook(t *testing.T) {
	clock := &testClock{now: time.Now()}
	stall := &stallingMerge{clock: clock}
	stall.Bucket = newTable(t, "mem://")
	o := walshard.Options{Commit: commit.Options{Now: clock.Now}}
	w1 := open(t, stall, "w1", o)
	w2 := open(t, stall, "w2", o)
	t.Cleanup(func() { w1.Close(); w2.Close() })
	mustKeyed(t, w1, "client", 1, 1, 2)
	if err := w1.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	mustKeyed(t, w2, "client", 1, 1, 2) // the copy
	mustKeyed(t, w2, "client", 2, 3)
	if _, err := w2.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	stall.armed.Store(true)
	if _, err := w2.Merge(ctx); err != nil {
		t.Fatal(err)
	}
	if stall.took.Load() == "" {
		t.Fatal("the merge wrote no vector for the collector to take")
	}
	got := baseIDs(t, stall.Bucket)
	if len(got) != 3 || got[1] != 1 || got[2] != 1 || got[3] != 1 {
		t.Fatalf("table holds %v, want ids 1, 2 and 3 once each", got)
	}
}

// stallingMerge, once armed, takes the next deletion vector written
// (garbage collection collecting it as an orphan) when the manifest that
// references it is created, and moves the clock past the safety age
// first: a merge that stalled.
type stallingMerge struct {
	blob.Bucket
	clock  *testClock
	armed  atomic.Bool
	vector atomic.Value // string: the vector written while armed
	took   atomic.Value // string: the vector taken
}

func (s *stallingMerge) PutIfAbsent(ctx context.Context, key string, data []byte) error {
	if s.armed.Load() && strings.HasPrefix(key, format.VersionsDir) {
		if v, _ := s.vector.Load().(string); v != "" && s.armed.CompareAndSwap(true, false) {
			s.clock.add(format.MinGCAge + time.Minute)
			if err := s.Bucket.Delete(ctx, v); err != nil {
				return err
			}
			s.took.Store(v)
		}
	}
	if err := s.Bucket.PutIfAbsent(ctx, key, data); err != nil {
		return err
	}
	if s.armed.Load() && strings.HasPrefix(key, format.DeletionsDir) {
		s.vector.Store(key)
	}
	return nil
}

// Copies of a retried append that two shards took, merged one right after
// the other hours after the append (their writers stalled, or were
// adopted late), are one append: the window of a name counts from the
// latest merge that met it. Before, the first merge recorded the name at
// the append's time, and the window, applied in the same commit at a
// newer append's time, forgot it: the second copy was installed too.
func TestCopiesMergedLateButTogetherAreStoredOnce(t *testing.T) {
	var mu sync.Mutex
	now := time.Now()
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	bk := newTable(t, "mem://")
	w1 := open(t, bk, "w1", walshard.Options{Commit: commit.Options{Now: clock}})
	w2 := open(t, bk, "w2", walshard.Options{Commit: commit.Options{Now: clock}})
	t.Cleanup(func() { w1.Close(); w2.Close() })
	mustKeyed(t, w1, "client", 1, 1, 2)
	mustKeyed(t, w2, "client", 1, 1, 2)
	mu.Lock()
	now = now.Add(13 * time.Hour)
	mu.Unlock()
	mustKeyed(t, w1, "other", 1, 3)
	for _, s := range []*walshard.Shard{w1, w2} {
		if _, err := s.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Merge(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if got := baseIDs(t, bk); len(got) != 3 || got[1] != 1 || got[2] != 1 || got[3] != 1 {
		t.Fatalf("table holds %v, want ids 1, 2 and 3 once each", got)
	}
}
