package commit_test

import (
	"errors"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/blob/fault"
	"github.com/stratadb/strata/commit"
	"github.com/stratadb/strata/compactor"
	"github.com/stratadb/strata/table"
)

// A writer uploads its fragment, then stalls so long that garbage
// collection, seeing an old unreferenced object, deletes it before the
// writer's manifest lands. The commit must not be acknowledged with the
// data gone: it removes the dangling fragment again, and Append writes the
// rows anew. Here the clock is moved ten minutes on, and the "collector"
// deletes data objects when the first manifest create arrives.
func TestAStallPastGCDoesNotLoseAnAcknowledgedAppend(t *testing.T) {
	under := open(t, "mem://")
	createIDTable(t, under)
	var fired atomic.Bool
	collector := fault.InjectorFunc(func(op fault.Op, key string) fault.Fault {
		if op == fault.OpPutIfAbsent && strings.HasPrefix(key, "_versions/") && fired.CompareAndSwap(false, true) {
			for o, err := range blob.List(ctx, under, "data/", 0) {
				if err == nil {
					_ = under.Delete(ctx, o.Key)
				}
			}
		}
		return fault.Fault{}
	})
	f := fault.Wrap(under, fault.OnKeys(regexp.MustCompile(`.`), collector))
	later := func() time.Time { return time.Now().Add(10 * time.Minute) }
	tb, err := commit.OpenTable(ctx, f, &commit.Options{Now: later})
	if err != nil {
		t.Fatal(err)
	}
	rec := idBatch(7, 8, 9)
	defer rec.Release()
	res, err := tb.Append(ctx, rec)
	if err != nil {
		t.Fatalf("append across a stall: %v", err)
	}
	if !fired.Load() {
		t.Fatal("the collector never ran")
	}
	// v2: the append whose fragment vanished; v3: its removal; v4: the
	// append again, with a fragment written anew.
	if res.Version != 4 {
		t.Fatalf("landed at v%d, want v4", res.Version)
	}
	s, err := table.Open(ctx, under, nil)
	if err != nil {
		t.Fatal(err)
	}
	var ids []int64
	for rec, err := range s.Scan(ctx, table.ScanOptions{}) {
		if err != nil {
			t.Fatalf("scan after the repair: %v", err)
		}
		ids = append(ids, rec.Column(0).(*array.Int64).Int64Values()...)
	}
	if len(ids) != 3 {
		t.Fatalf("rows %v, want 7, 8, 9 once", ids)
	}
	v3, _ := table.ReadManifest(ctx, under, 3)
	if v3.Transaction.Kind != table.KindRewrite || len(v3.Fragments) != 0 {
		t.Fatalf("v3 should remove the lost fragment: %+v", v3.Transaction)
	}
}

// A collection records the objects it is about to delete (an orphan
// record) before it looks for versions made since its listing; a stalled
// writer whose manifest lands after that record must not acknowledge its
// commit, even though its fragment is still there a moment before the
// collector deletes it. Here the "collector" writes its record when the
// writer's manifest create arrives, and deletes only afterwards.
func TestAStalledCommitListedInAnOrphanRecordIsNotAcknowledged(t *testing.T) {
	under := open(t, "mem://")
	createIDTable(t, under)
	var fired atomic.Bool
	var doomed []string
	collector := fault.InjectorFunc(func(op fault.Op, key string) fault.Fault {
		if op == fault.OpPutIfAbsent && strings.HasPrefix(key, "_versions/") && fired.CompareAndSwap(false, true) {
			for o, err := range blob.List(ctx, under, "data/", 0) {
				if err == nil {
					doomed = append(doomed, o.Key)
				}
			}
			if err := table.WriteOrphanRecord(ctx, under, doomed, time.Now()); err != nil {
				t.Error(err)
			}
		}
		return fault.Fault{}
	})
	f := fault.Wrap(under, fault.OnKeys(regexp.MustCompile(`.`), collector))
	later := func() time.Time { return time.Now().Add(10 * time.Minute) }
	tb, err := commit.OpenTable(ctx, f, &commit.Options{Now: later})
	if err != nil {
		t.Fatal(err)
	}
	rec := idBatch(7, 8, 9)
	defer rec.Release()
	res, err := tb.Append(ctx, rec)
	if err != nil {
		t.Fatalf("append across a stall: %v", err)
	}
	if len(doomed) != 1 {
		t.Fatalf("the collector listed %v", doomed)
	}
	// The collector goes on and deletes what it recorded.
	for _, k := range doomed {
		if err := under.Delete(ctx, k); err != nil {
			t.Fatal(err)
		}
	}
	if res.Version != 4 {
		t.Fatalf("landed at v%d, want v4 (v2 not acknowledged, v3 its undo)", res.Version)
	}
	s, err := table.Open(ctx, under, nil)
	if err != nil {
		t.Fatal(err)
	}
	var ids []int64
	for rec, err := range s.Scan(ctx, table.ScanOptions{}) {
		if err != nil {
			t.Fatalf("scan after the collection: %v", err)
		}
		ids = append(ids, rec.Column(0).(*array.Int64).Int64Values()...)
	}
	if !slices.Equal(ids, []int64{7, 8, 9}) {
		t.Fatalf("rows %v, want 7, 8, 9 once", ids)
	}
}

// The same stall under a compaction: its outputs are gone, so the Rewrite
// is undone — the sources it removed come back — and no row is lost.
func TestAStalledRewriteWhoseOutputsGCTookIsUndone(t *testing.T) {
	b := open(t, "mem://")
	createIDTable(t, b)
	tb, _ := commit.OpenTable(ctx, b, nil)
	for i := range 4 {
		rec := idBatch(int64(i))
		if _, err := tb.Append(ctx, rec); err != nil {
			t.Fatal(err)
		}
		rec.Release()
	}
	s, _ := table.Open(ctx, b, nil)
	var ids []uint64
	var recs []arrow.RecordBatch
	for _, f := range s.Manifest().Fragments {
		ids = append(ids, f.ID)
	}
	for rec, err := range s.Scan(ctx, table.ScanOptions{}) {
		if err != nil {
			t.Fatal(err)
		}
		rec.Retain()
		recs = append(recs, rec)
	}
	out, err := table.WriteFragment(ctx, b, idSchema, recs...)
	if err != nil {
		t.Fatal(err)
	}
	_ = b.Delete(ctx, out.Key) // the collector took the output during the stall
	_, err = commit.Commit(ctx, b, s.Manifest(), table.Transaction{Kind: table.KindRewrite, Removed: ids, Added: []table.Fragment{out}},
		&commit.Options{Now: func() time.Time { return time.Now().Add(10 * time.Minute) }})
	var ce *commit.ConflictError
	if !errors.As(err, &ce) || !ce.LostData {
		t.Fatalf("stalled rewrite: %v, want a lost-data conflict", err)
	}
	after, _ := table.Open(ctx, b, nil)
	var got []int64
	for rec, err := range after.Scan(ctx, table.ScanOptions{}) {
		if err != nil {
			t.Fatalf("scan after the undo: %v", err)
		}
		got = append(got, rec.Column(0).(*array.Int64).Int64Values()...)
	}
	if len(got) != 4 || len(after.Manifest().Fragments) != 4 {
		t.Fatalf("after the undo: rows %v in %d fragments", got, len(after.Manifest().Fragments))
	}
}

// ids reads every id of the latest version.
func latestIDs(t *testing.T, b blob.Bucket) []int64 {
	t.Helper()
	s, err := table.Open(ctx, b, nil)
	if err != nil {
		t.Fatal(err)
	}
	var got []int64
	for rec, err := range s.Scan(ctx, table.ScanOptions{}) {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, rec.Column(0).(*array.Int64).Int64Values()...)
	}
	slices.Sort(got)
	return got
}

// afterLanding runs fn once, at the first request matching op and key
// prefix made after our manifest create (which moves the clock an hour on,
// so the commit checks for a stall).
func afterLanding(under blob.Bucket, op fault.Op, prefix string, fn func()) (*fault.Bucket, func() time.Time) {
	var offset atomic.Int64
	var landed, fired atomic.Bool
	f := fault.Wrap(under, fault.InjectorFunc(func(o fault.Op, key string) fault.Fault {
		switch {
		case o == fault.OpPutIfAbsent && strings.HasPrefix(key, "_versions/") && !landed.Load():
			offset.Store(int64(time.Hour))
			landed.Store(true)
		case landed.Load() && o == op && strings.HasPrefix(key, prefix) && fired.CompareAndSwap(false, true):
			fn()
		}
		return fault.Fault{}
	}))
	return f, func() time.Time { return time.Now().Add(time.Duration(offset.Load())) }
}

// A commit that landed, stalled, and then met a GC boundary covering its
// version — created after it landed, as a collection of old versions does
// once newer ones exist — is a legitimate commit, not a ghost: it must
// not delete itself (the retry would write its rows twice).
func TestABoundaryCreatedAfterTheCommitLandedIsNoGhost(t *testing.T) {
	under := open(t, "mem://")
	createIDTable(t, under)
	f, now := afterLanding(under, fault.OpAttributes, "_versions/", func() {
		other, _ := commit.OpenTable(ctx, under, nil)
		rec := idBatch(2)
		defer rec.Release()
		if _, err := other.Append(ctx, rec); err != nil { // v3, built on ours
			t.Error(err)
		}
		if err := under.PutIfAbsent(ctx, table.GCBoundaryKey(2), nil); err != nil {
			t.Error(err)
		}
	})
	tb, _ := commit.OpenTable(ctx, f, &commit.Options{Now: now})
	rec := idBatch(1)
	defer rec.Release()
	res, err := tb.Append(ctx, rec)
	if err != nil || res.Version != 2 {
		t.Fatalf("append: %+v %v, want v2", res, err)
	}
	if got := latestIDs(t, under); !slices.Equal(got, []int64{1, 2}) {
		t.Fatalf("rows %v, want 1 and 2 once", got)
	}
}

// A commit that landed and stalled before checking its fragment, while a
// compaction folded that fragment and GC collected it: its rows live on in
// the compaction's output, so it succeeds (writing them again would double
// them).
func TestAFragmentCompactedAfterTheCommitLandedIsNotLost(t *testing.T) {
	under := open(t, "mem://")
	createIDTable(t, under)
	other, _ := commit.OpenTable(ctx, under, nil)
	rec0 := idBatch(0)
	if _, err := other.Append(ctx, rec0); err != nil { // v2
		t.Fatal(err)
	}
	rec0.Release()
	f, now := afterLanding(under, fault.OpAttributes, "data/", func() {
		before, _ := table.ReadLatest(ctx, under)
		if _, err := compactor.Compact(ctx, under, &compactor.Policy{MinFragments: 2}, nil); err != nil {
			t.Error(err)
		}
		for _, fr := range before.Fragments {
			_ = under.Delete(ctx, fr.Key) // collected: no kept version references them
		}
	})
	tb, _ := commit.OpenTable(ctx, f, &commit.Options{Now: now})
	rec := idBatch(1)
	defer rec.Release()
	res, err := tb.Append(ctx, rec)
	if err != nil || res.Version != 3 {
		t.Fatalf("append: %+v %v, want v3", res, err)
	}
	if got := latestIDs(t, under); !slices.Equal(got, []int64{0, 1}) {
		t.Fatalf("rows %v, want 0 and 1 once", got)
	}
}

// A create whose response is lost, then a stall while the version is
// committed upon and collected: the commit cannot tell whether it landed.
// It must say so, not create the version again (a ghost the table does not
// reach, while the rows may be in it already).
func TestAnAmbiguousCreateCollectedBeforeItsOutcomeIsReadIsUnknown(t *testing.T) {
	under := open(t, "mem://")
	createIDTable(t, under)
	var puts, gets atomic.Int32
	f := fault.Wrap(under, fault.InjectorFunc(func(op fault.Op, key string) fault.Fault {
		switch {
		case op == fault.OpPutIfAbsent && key == table.ManifestKey(2) && puts.Add(1) == 1:
			return fault.Fault{Action: fault.LoseResponse}
		case op == fault.OpGet && key == table.ManifestKey(2) && gets.Add(1) == 1:
			other, _ := commit.OpenTable(ctx, under, nil)
			rec := idBatch(2)
			defer rec.Release()
			if _, err := other.Append(ctx, rec); err != nil { // v3, on ours
				t.Error(err)
			}
			if err := under.Delete(ctx, table.ManifestKey(2)); err != nil { // collected
				t.Error(err)
			}
		}
		return fault.Fault{}
	}))
	tb, _ := commit.OpenTable(ctx, f, nil)
	rec := idBatch(1)
	defer rec.Release()
	_, err := tb.Append(ctx, rec)
	if !errors.Is(err, commit.ErrOutcomeUnknown) {
		t.Fatalf("append: %v, want ErrOutcomeUnknown", err)
	}
	if puts.Load() != 1 {
		t.Fatalf("v2 was created %d times", puts.Load())
	}
	if got := latestIDs(t, under); !slices.Equal(got, []int64{1, 2}) {
		t.Fatalf("rows %v, want 1 (it did land) and 2", got)
	}
}

// A Delete writes its deletion vectors, then stalls past garbage
// collection, which takes the vectors as orphans (or records them as
// orphans, to delete next) before the Delete's manifest lands. The Delete
// must not be acknowledged with the table referencing a vector that is
// gone: it writes the vectors again and points the fragments at the
// copies, and the table reads with the rows deleted. (Found by the
// simulation's deleters.)
func TestAStallPastGCDoesNotBreakAnAcknowledgedDelete(t *testing.T) {
	for _, how := range []string{"deleted", "recorded as orphans"} {
		t.Run(how, func(t *testing.T) {
			under := open(t, "mem://")
			createIDTable(t, under)
			setup, err := commit.OpenTable(ctx, under, nil)
			if err != nil {
				t.Fatal(err)
			}
			rec := idBatch(1, 2, 3, 4, 5, 6)
			defer rec.Release()
			if _, err := setup.Append(ctx, rec); err != nil {
				t.Fatal(err)
			}
			var fired atomic.Bool
			var fail error
			collector := fault.InjectorFunc(func(op fault.Op, key string) fault.Fault {
				if op == fault.OpPutIfAbsent && strings.HasPrefix(key, "_versions/") && fired.CompareAndSwap(false, true) {
					var keys []string
					for o, err := range blob.List(ctx, under, table.DeletionsDir, 0) {
						if err != nil {
							fail = err
							return fault.Fault{}
						}
						keys = append(keys, o.Key)
					}
					if how == "deleted" {
						for _, k := range keys {
							if err := under.Delete(ctx, k); err != nil {
								fail = err
							}
						}
					} else if err := table.WriteOrphanRecord(ctx, under, keys, time.Now()); err != nil {
						fail = err
					}
				}
				return fault.Fault{}
			})
			f := fault.Wrap(under, fault.OnKeys(regexp.MustCompile(`.`), collector))
			// The clock moves ten minutes on during the stall.
			clock := func() time.Time {
				if fired.Load() {
					return time.Now().Add(10 * time.Minute)
				}
				return time.Now()
			}
			tb, err := commit.OpenTable(ctx, f, &commit.Options{Now: clock})
			if err != nil {
				t.Fatal(err)
			}
			pred, err := table.ParseFilter("id >= 2 AND id < 5")
			if err != nil {
				t.Fatal(err)
			}
			res, n, err := tb.Delete(ctx, pred)
			if err != nil || n != 3 {
				t.Fatalf("delete across a stall: %d rows, %v", n, err)
			}
			if !fired.Load() || fail != nil {
				t.Fatalf("the collector ran %v: %v", fired.Load(), fail)
			}
			// v3: the delete whose vector was taken; v4: the fragment
			// pointed at a fresh copy.
			if res.Version != 4 {
				t.Fatalf("acknowledged at v%d, want v4", res.Version)
			}
			s, err := table.Open(ctx, under, nil)
			if err != nil {
				t.Fatal(err)
			}
			var ids []int64
			for rec, err := range s.Scan(ctx, table.ScanOptions{}) {
				if err != nil {
					t.Fatalf("scan after the delete: %v", err)
				}
				ids = append(ids, rec.Column(0).(*array.Int64).Int64Values()...)
			}
			slices.Sort(ids)
			if !slices.Equal(ids, []int64{1, 5, 6}) {
				t.Fatalf("rows %v, want 1, 5, 6", ids)
			}
		})
	}
}
