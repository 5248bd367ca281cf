package commit_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
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
	"github.com/stratadb/strata/table/changes"
	"github.com/stratadb/strata/table/expr"
	"github.com/stratadb/strata/table/format"
	"github.com/stratadb/strata/table/fragment"
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
					if err := under.Delete(ctx, o.Key); err != nil {
						t.Fatal(err)
					}
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
	v3, err := table.ReadManifest(ctx, under, 3)
	if err != nil {
		t.Fatal(err)
	}
	if v3.Transaction.Kind != format.KindRewrite || len(v3.Fragments) != 0 {
		t.Fatalf("v3 should remove the lost fragment: %+v", v3.Transaction)
	}
}

// A collection records the objects it is about to delete (an orphan
// record) before it looks for versions made since its listing; a stalled
// writer whose manifest lands after that record must not acknowledge its
// commit, even though its fragment is still there a moment before the
// collector deletes it. Here the "collector" writes its record when the
// writer's manifest create arrives, and deletes only afterwards.
//
// The same when the writer's clock runs two hours ahead of the store's:
// the records a stalled writer reads are those the store made since its
// fragment was uploaded, on the store's clock. By the writer's clock the
// collector's record (made ten minutes after the upload, by the store's)
// would be older than the fragment, and was skipped: the commit was
// acknowledged, and the collector deleted its rows. On a folder the
// store's clock is each file's modification time, which that case sets
// back.
func TestAStalledCommitListedInAnOrphanRecordIsNotAcknowledged(t *testing.T) {
	for _, skewed := range []bool{false, true} {
		name := "the store's clock and the writer's agree"
		if skewed {
			name = "the store's clock two hours behind the writer's"
		}
		t.Run(name, func(t *testing.T) { stalledAppendListedAsOrphan(t, skewed) })
	}
}

func stalledAppendListedAsOrphan(t *testing.T, skewed bool) {
	dir := t.TempDir()
	under := open(t, "file://"+dir)
	createIDTable(t, under)
	storeNow := time.Now()
	if skewed {
		storeNow = storeNow.Add(-2 * time.Hour)
	}
	backdate := func(key string, to time.Time) {
		if err := os.Chtimes(filepath.Join(dir, key), to, to); err != nil {
			t.Error(err)
		}
	}
	var fired atomic.Bool
	var doomed []string
	collector := fault.InjectorFunc(func(op fault.Op, key string) fault.Fault {
		if op == fault.OpPutIfAbsent && strings.HasPrefix(key, "_versions/") && fired.CompareAndSwap(false, true) {
			for o, err := range blob.List(ctx, under, "data/", 0) {
				if err == nil {
					doomed = append(doomed, o.Key)
					if skewed { // uploaded ten minutes before the collection, by the store
						backdate(o.Key, storeNow.Add(-10*time.Minute))
					}
				}
			}
			if err := format.WriteOrphanRecord(ctx, under, doomed, storeNow); err != nil {
				t.Error(err)
			}
			for o, err := range blob.List(ctx, under, format.OrphansDir, 0) {
				if err == nil && skewed {
					backdate(o.Key, storeNow)
				}
			}
		}
		return fault.Fault{}
	})
	f := fault.Wrap(under, fault.OnKeys(regexp.MustCompile(`.`), collector))
	// The writer's clock: the host's (which dates its fragments), and the
	// commit ten minutes on — the stall.
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
	tb, err := commit.OpenTable(ctx, b, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 4 {
		rec := idBatch(int64(i))
		if _, err := tb.Append(ctx, rec); err != nil {
			t.Fatal(err)
		}
		rec.Release()
	}
	s, err := table.Open(ctx, b, nil)
	if err != nil {
		t.Fatal(err)
	}
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
	out, err := fragment.Write(ctx, b, idSchema, recs...)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Delete(ctx, out.Key); err != nil { // the collector took the output during the stall
		t.Fatal(err)
	}
	_, err = commit.Commit(ctx, b, s.Manifest(), format.Transaction{Kind: format.KindRewrite, Removed: ids, Added: []format.Fragment{out}},
		&commit.Options{Now: func() time.Time { return time.Now().Add(10 * time.Minute) }})
	var ce *commit.ConflictError
	if !errors.As(err, &ce) || !ce.LostData {
		t.Fatalf("stalled rewrite: %v, want a lost-data conflict", err)
	}
	after, err := table.Open(ctx, b, nil)
	if err != nil {
		t.Fatal(err)
	}
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
		other, err := commit.OpenTable(ctx, under, nil)
		if err != nil {
			t.Fatal(err)
		}
		rec := idBatch(2)
		defer rec.Release()
		if _, err := other.Append(ctx, rec); err != nil { // v3, built on ours
			t.Error(err)
		}
		if err := under.PutIfAbsent(ctx, format.GCBoundaryKey(2), nil); err != nil {
			t.Error(err)
		}
	})
	tb, err := commit.OpenTable(ctx, f, &commit.Options{Now: now})
	if err != nil {
		t.Fatal(err)
	}
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
	other, err := commit.OpenTable(ctx, under, nil)
	if err != nil {
		t.Fatal(err)
	}
	rec0 := idBatch(0)
	if _, err := other.Append(ctx, rec0); err != nil { // v2
		t.Fatal(err)
	}
	rec0.Release()
	f, now := afterLanding(under, fault.OpAttributes, "data/", func() {
		before, err := table.ReadLatest(ctx, under)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := compactor.Compact(ctx, under, &compactor.Policy{MinFragments: 2}, nil); err != nil {
			t.Error(err)
		}
		for _, fr := range before.Fragments {
			if err := under.Delete(ctx, fr.Key); err != nil { // collected: no kept version references them
				t.Fatal(err)
			}
		}
	})
	tb, err := commit.OpenTable(ctx, f, &commit.Options{Now: now})
	if err != nil {
		t.Fatal(err)
	}
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
		case op == fault.OpPutIfAbsent && key == format.ManifestKey(2) && puts.Add(1) == 1:
			return fault.Fault{Action: fault.LoseResponse}
		case op == fault.OpGet && key == format.ManifestKey(2) && gets.Add(1) == 1:
			other, err := commit.OpenTable(ctx, under, nil)
			if err != nil {
				t.Fatal(err)
			}
			rec := idBatch(2)
			defer rec.Release()
			if _, err := other.Append(ctx, rec); err != nil { // v3, on ours
				t.Error(err)
			}
			if err := under.Delete(ctx, format.ManifestKey(2)); err != nil { // collected
				t.Error(err)
			}
		}
		return fault.Fault{}
	}))
	tb, err := commit.OpenTable(ctx, f, nil)
	if err != nil {
		t.Fatal(err)
	}
	rec := idBatch(1)
	defer rec.Release()
	_, err = tb.Append(ctx, rec)
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
	const skewed = "recorded as orphans by a store two hours behind the writer"
	for _, how := range []string{"deleted", "recorded as orphans", skewed} {
		t.Run(how, func(t *testing.T) {
			// On a folder the store's clock is each file's modification
			// time, which the skewed case sets back.
			var fail error
			dir := t.TempDir()
			under := open(t, "file://"+dir)
			storeNow := time.Now().Add(-2 * time.Hour)
			backdate := func(prefix string, to time.Time) {
				for o, err := range blob.List(ctx, under, prefix, 0) {
					if err == nil {
						if err := os.Chtimes(filepath.Join(dir, o.Key), to, to); err != nil {
							fail = err
						}
					}
				}
			}
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
			collector := fault.InjectorFunc(func(op fault.Op, key string) fault.Fault {
				if op == fault.OpPutIfAbsent && strings.HasPrefix(key, "_versions/") && fired.CompareAndSwap(false, true) {
					var keys []string
					for o, err := range blob.List(ctx, under, format.DeletionsDir, 0) {
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
					} else if how == skewed {
						// Uploaded ten minutes before the collection, by the store.
						backdate(format.DeletionsDir, storeNow.Add(-10*time.Minute))
						if err := format.WriteOrphanRecord(ctx, under, keys, storeNow); err != nil {
							fail = err
						}
						backdate(format.OrphansDir, storeNow)
					} else if err := format.WriteOrphanRecord(ctx, under, keys, time.Now()); err != nil {
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
			pred, err := expr.ParseFilter("id >= 2 AND id < 5")
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
			// The changes read through the taken vector (from its copy):
			// the three rows deleted once, by v3, and nothing by v4.
			var deleted []int64
			for c, err := range changes.Changes(ctx, under, 2, 4, changes.ChangesOptions{}) {
				if err != nil {
					t.Fatalf("changes across the delete whose vector was taken: %v", err)
				}
				if c.Kind != changes.ChangeDelete || c.Version != 3 {
					t.Fatalf("a %s change at v%d", c.Kind, c.Version)
				}
				deleted = append(deleted, c.Rows.Column(0).(*array.Int64).Int64Values()...)
			}
			slices.Sort(deleted)
			if !slices.Equal(deleted, []int64{2, 3, 4}) {
				t.Fatalf("changes 2..4 deleted %v, want 2, 3, 4", deleted)
			}
		})
	}
}

// A writer lists the versions, then stalls while reading the ones it
// lacks; meanwhile others commit and garbage collection takes the version
// slot after them. The writer's base is as old as its listing, not as the
// reads after it: its create of that slot lands on a collected version (a
// ghost), and it must see so and commit again above, never acknowledge the
// ghost. (Found by the simulation, seed 709249: the append was
// acknowledged at a collected version and its rows were lost.)
func TestAStallDuringCatchUpDoesNotAcknowledgeAGhost(t *testing.T) {
	under, offset, clock, appendOther := stallSetup(t)
	var fired atomic.Bool
	var fail atomic.Value
	stall := fault.InjectorFunc(func(fault.Op, string) fault.Fault { return fault.Fault{} })
	w, err := commit.OpenTable(ctx, fault.Wrap(under, fault.InjectorFunc(func(op fault.Op, key string) fault.Fault { return stall(op, key) })),
		&commit.Options{Now: clock}) // sees v1
	if err != nil {
		t.Fatal(err)
	}
	appendOther(1) // v2, which w lacks
	if err := table.CreateTag(ctx, under, "keep", 2); err != nil {
		t.Fatal(err) // so the collection keeps v2, which w then reads
	}
	stall = func(op fault.Op, key string) fault.Fault {
		if op == fault.OpGet && key == format.ManifestKey(2) && fired.CompareAndSwap(false, true) {
			appendOther(2) // v3
			appendOther(3) // v4
			offset.Store(int64(10 * time.Minute))
			res, err := compactor.GC(ctx, under, &compactor.GCPolicy{KeepVersions: 1, RetainFor: compactor.MinRetain, SafetyAge: compactor.MinRetain},
				time.Now().Add(10*time.Minute))
			if err != nil || !slices.Contains(res.VersionsDeleted, 3) {
				fail.Store(fmt.Sprintf("the collection: %+v %v", res, err))
			}
		}
		return fault.Fault{}
	}
	appendAcrossTheStall(t, w, under, &fired, &fail)
}

// A writer idle for longer than garbage collection's retention holds a
// base whose successors were collected: it cannot check what they did, so
// it plans again against the latest version instead of failing every
// append from then on. (Found by the simulation: its direct appenders
// failed with "version not found" for the rest of a run.)
func TestAnIdleHandleWhoseBaseWasOutlivedAppendsAgain(t *testing.T) {
	b := open(t, "mem://")
	createIDTable(t, b)
	idle, err := commit.OpenTable(ctx, b, nil) // at v1
	if err != nil {
		t.Fatal(err)
	}
	busy, err := commit.OpenTable(ctx, b, nil)
	if err != nil {
		t.Fatal(err)
	}
	for id := range int64(5) {
		rec := idBatch(id)
		if _, err := busy.Append(ctx, rec); err != nil {
			t.Fatal(err)
		}
		rec.Release()
	}
	res, err := compactor.GC(ctx, b, &compactor.GCPolicy{KeepVersions: 1}, time.Now().Add(2*time.Hour))
	if err != nil || !slices.Contains(res.VersionsDeleted, 2) {
		t.Fatalf("the collection: %+v %v", res, err)
	}
	rec := idBatch(100)
	defer rec.Release()
	got, err := idle.Append(ctx, rec)
	if err != nil || got.Version != 7 {
		t.Fatalf("the idle handle's append: v%d, %v; want v7", got.Version, err)
	}
}

// A writer stalls before its create; meanwhile others commit that version
// and more, a tag keeps that version, and garbage collection takes the
// slot after it. The writer loses its create, rebases on the winner alone
// — without a listing, which would have shown the newest version — and
// creates the collected slot: the stall started before the base it holds
// was known to be the newest, so it must check for a ghost and commit
// again above, never acknowledge the ghost. (Found by the simulation, seed
// 3006178: the append was acknowledged at a collected version after a lost
// race, and its rows were lost.)
func TestALoserRebasedAfterAStallDoesNotAcknowledgeAGhost(t *testing.T) {
	under, offset, clock, appendOther := stallSetup(t)
	var fired atomic.Bool
	var fail atomic.Value
	stalled := fault.Wrap(under, fault.InjectorFunc(func(op fault.Op, key string) fault.Fault {
		if op == fault.OpPutIfAbsent && key == format.ManifestKey(2) && fired.CompareAndSwap(false, true) {
			appendOther(1) // v2: the writer's create will lose to it
			if err := table.CreateTag(ctx, under, "keep", 2); err != nil {
				fail.Store(err.Error())
			}
			appendOther(2) // v3, collected below
			appendOther(3) // v4, the newest
			offset.Store(int64(10 * time.Minute))
			res, err := compactor.GC(ctx, under, &compactor.GCPolicy{KeepVersions: 1, RetainFor: compactor.MinRetain, SafetyAge: compactor.MinRetain},
				time.Now().Add(10*time.Minute))
			if err != nil || !slices.Contains(res.VersionsDeleted, 3) || slices.Contains(res.VersionsDeleted, 2) {
				fail.Store(fmt.Sprintf("the collection: %+v %v", res, err))
			}
		}
		return fault.Fault{}
	}))
	w, err := commit.OpenTable(ctx, stalled, &commit.Options{Now: clock}) // sees v1
	if err != nil {
		t.Fatal(err)
	}
	appendAcrossTheStall(t, w, under, &fired, &fail)
}

// stallSetup makes an id table, a clock that offset moves on, and a
// function appending one id through a handle of another writer.
func stallSetup(t *testing.T) (blob.Bucket, *atomic.Int64, func() time.Time, func(int64)) {
	t.Helper()
	under := open(t, "mem://")
	createIDTable(t, under)
	offset := new(atomic.Int64)
	clock := func() time.Time { return time.Now().Add(time.Duration(offset.Load())) }
	other, err := commit.OpenTable(ctx, under, nil)
	if err != nil {
		t.Fatal(err)
	}
	appendOther := func(id int64) {
		rec := idBatch(id)
		defer rec.Release()
		if _, err := other.Append(ctx, rec); err != nil {
			t.Fatal(err)
		}
	}
	return under, offset, clock, appendOther
}

// appendAcrossTheStall appends id 4 through w, whose stall (fired, or the
// reason it failed in fail) lets others append 1..3 and collect v3: the
// append must land above v4, and the table hold 1..4.
func appendAcrossTheStall(t *testing.T, w *commit.Table, under blob.Bucket, fired *atomic.Bool, fail *atomic.Value) {
	t.Helper()
	rec := idBatch(4)
	defer rec.Release()
	res, err := w.Append(ctx, rec)
	if !fired.Load() || fail.Load() != nil {
		t.Fatalf("the stall did not happen as planned: %v", fail.Load())
	}
	if err != nil {
		t.Fatalf("append across the stall: %v", err)
	}
	if res.Version <= 4 {
		t.Fatalf("acknowledged at v%d, a version slot collected during the stall", res.Version)
	}
	if ids := latestIDs(t, under); !slices.Equal(ids, []int64{1, 2, 3, 4}) {
		t.Fatalf("rows %v, want 1..4", ids)
	}
}
