package commit_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/blob/fault"
	"github.com/stratadb/strata/commit"
	"github.com/stratadb/strata/compactor"
	"github.com/stratadb/strata/table"
	"github.com/stratadb/strata/table/expr"
	"github.com/stratadb/strata/table/format"
	"github.com/stratadb/strata/table/fragment"
	"github.com/stratadb/strata/table/value"
)

// Promises of idempotent appends (format.Idempotency), pinned here:
//   - an append sent again under its key stores nothing and answers the
//     first one's version (TestAnAppendSentAgainUnderItsKeyIsStoredOnce);
//   - the same key with other rows is refused (TestAKeyReusedForOtherRowsIsRefused);
//   - a caller retrying every error, unknown outcomes included, stores
//     each append once (TestRetriesOfUnknownOutcomesStoreEachAppendOnce);
//   - two attempts of one append racing store it once
//     (TestRacingAttemptsOfOneAppendStoreItOnce);
//   - the record survives every other kind of commit, and replaying a
//     version's transaction rebuilds it (TestRecordsSurviveOtherCommitsAndReplay);
//   - a create with rows sent again answers its version 1 (TestACreateSentAgainUnderItsKeyAnswersItsVersion);
//   - a recorded append whose data garbage collection took is not taken
//     for stored (TestARetryOfAnAppendWhoseDataWasLostStoresItAgain), nor
//     one taken back that a handle still holds, its versions collected
//     (TestARetryFromAStaleHandleAfterItsAppendWasTakenBackAndCollected).

func idempotentTable(t *testing.T) (blob.Bucket, *commit.Table) {
	t.Helper()
	b := open(t, "mem://")
	createIDTable(t, b)
	tb, err := commit.OpenTable(ctx, b, nil)
	if err != nil {
		t.Fatal(err)
	}
	return b, tb
}

func appendOnce(t *testing.T, tb *commit.Table, key format.Idempotency, ids ...int64) commit.Result {
	t.Helper()
	rec := idBatch(ids...)
	defer rec.Release()
	res, err := tb.AppendOnce(ctx, key, rec)
	if err != nil {
		t.Fatalf("append %v under %v: %v", ids, key, err)
	}
	return res
}

func TestAnAppendSentAgainUnderItsKeyIsStoredOnce(t *testing.T) {
	b, tb := idempotentTable(t)
	key := format.Idempotency{Producer: "client-1", Seq: 7}
	first := appendOnce(t, tb, key, 1, 2, 3)
	if first.Duplicate || first.Version != 2 {
		t.Fatalf("first append: %+v, want v2, not a duplicate", first)
	}
	// Again through this handle, and through a new one (a new process).
	again := appendOnce(t, tb, key, 1, 2, 3)
	other, err := commit.OpenTable(ctx, b, nil)
	if err != nil {
		t.Fatal(err)
	}
	third := appendOnce(t, other, key, 1, 2, 3)
	for _, r := range []commit.Result{again, third} {
		if !r.Duplicate || r.Version != 2 || r.Rows != 3 {
			t.Fatalf("append sent again: %+v, want a duplicate of v2 with 3 rows", r)
		}
	}
	// The next sequence number is a new append.
	if r := appendOnce(t, tb, format.Idempotency{Producer: "client-1", Seq: 8}, 4); r.Duplicate || r.Version != 3 {
		t.Fatalf("next sequence number: %+v, want v3", r)
	}
	if got := latestIDs(t, b); !slices.Equal(got, []int64{1, 2, 3, 4}) {
		t.Fatalf("table holds %v, want [1 2 3 4]", got)
	}
}

func TestAKeyReusedForOtherRowsIsRefused(t *testing.T) {
	b, tb := idempotentTable(t)
	key := format.Idempotency{Producer: "k-1"}
	appendOnce(t, tb, key, 1)
	rec := idBatch(2)
	defer rec.Release()
	if _, err := tb.AppendOnce(ctx, key, rec); !errors.Is(err, format.ErrKeyReused) {
		t.Fatalf("same key, other rows: %v, want ErrKeyReused", err)
	}
	if _, err := tb.AppendOnce(ctx, format.Idempotency{}, rec); !errors.Is(err, format.ErrBadIdempotency) {
		t.Fatalf("empty producer: %v, want ErrBadIdempotency", err)
	}
	if got := latestIDs(t, b); !slices.Equal(got, []int64{1}) {
		t.Fatalf("table holds %v, want [1]", got)
	}
}

// Each writer retries an append, through a new handle, until it is
// acknowledged, whatever the error: the store loses responses of
// manifest creates, answers "exists" for creates that landed, and the
// writer's context is canceled while some creates are out (the outcome
// is then unknown to it). Under keys every append is stored exactly once;
// without them (a planted fault in the key check, or plain Append) this
// test finds doubles.
func TestRetriesOfUnknownOutcomesStoreEachAppendOnce(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	under, f := faultyStore(t, seed)
	createIDTable(t, under)
	const writers, n = 4, 25
	var unknown sync.Map
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range n {
				id := int64(w*1000 + i)
				key := format.Idempotency{Producer: fmt.Sprintf("writer-%d", w), Seq: uint64(i)}
				for attempt := 0; ; attempt++ {
					if attempt > 200 {
						t.Errorf("append %d never acknowledged", id)
						return
					}
					tb, err := commit.OpenTable(ctx, f, &commit.Options{MaxAttempts: 50, Budget: 20 * time.Second})
					if err != nil {
						continue
					}
					// Every third attempt is canceled as its manifest create
					// goes out: an unknown outcome for the caller.
					cctx, cancel := context.WithCancel(ctx)
					tbc := tb
					if attempt%3 == 0 {
						cb := &cancelMidCreate{Bucket: f, cancel: cancel}
						if tbc, err = commit.OpenTable(ctx, cb, &commit.Options{MaxAttempts: 50, Budget: 20 * time.Second}); err != nil {
							cancel()
							continue
						}
					}
					rec := idBatch(id)
					_, err = tbc.AppendOnce(cctx, key, rec)
					rec.Release()
					cancel()
					if err == nil {
						break
					}
					if errors.Is(err, commit.ErrOutcomeUnknown) {
						unknown.Store(id, true)
					}
				}
			}
		})
	}
	wg.Wait()
	n0 := 0
	unknown.Range(func(any, any) bool { n0++; return true })
	t.Logf("faults injected: %v over %d requests; %d appends had an unknown outcome at least once", f.Injected(), f.Requests(), n0)
	if n0 == 0 {
		t.Fatal("no append's outcome was unknown: the test did not test retries")
	}
	var want []int64
	for w := range writers {
		for i := range n {
			want = append(want, int64(w*1000+i))
		}
	}
	if got := latestIDs(t, under); !slices.Equal(got, want) {
		t.Fatalf("table holds %d rows, want each of %d once (first differences: %v)", len(got), len(want), firstDiff(got, want))
	}
}

func firstDiff(got, want []int64) string {
	for i := range min(len(got), len(want)) {
		if got[i] != want[i] {
			return fmt.Sprintf("at %d: %d, want %d", i, got[i], want[i])
		}
	}
	return fmt.Sprintf("lengths %d and %d", len(got), len(want))
}

// Two attempts of one append, each through a handle at the same version,
// race: one stores the rows, the other finds the key when it catches up.
func TestRacingAttemptsOfOneAppendStoreItOnce(t *testing.T) {
	for round := range 20 {
		b, _ := idempotentTable(t)
		key := format.Idempotency{Producer: "racer", Seq: uint64(round)}
		var handles [4]*commit.Table
		for i := range handles {
			var err error
			if handles[i], err = commit.OpenTable(ctx, b, nil); err != nil {
				t.Fatal(err)
			}
		}
		results := make([]commit.Result, len(handles))
		var wg sync.WaitGroup
		for i, h := range handles {
			wg.Go(func() { results[i] = appendOnce(t, h, key, 42) })
		}
		wg.Wait()
		stored := 0
		for _, r := range results {
			if r.Version != 2 {
				t.Fatalf("round %d: results %+v, want every one at v2", round, results)
			}
			if !r.Duplicate {
				stored++
			}
		}
		if stored != 1 {
			t.Fatalf("round %d: %d attempts stored the rows, want 1 (%+v)", round, stored, results)
		}
		if got := latestIDs(t, b); !slices.Equal(got, []int64{42}) {
			t.Fatalf("round %d: table holds %v", round, got)
		}
	}
}

// The record of an append outlives commits of other kinds, and the state
// that replaying each version's transaction rebuilds is the one stored.
func TestRecordsSurviveOtherCommitsAndReplay(t *testing.T) {
	b, tb := idempotentTable(t)
	key := format.Idempotency{Producer: "survivor"}
	appendOnce(t, tb, key, 1, 2)
	appendOnce(t, tb, format.Idempotency{Producer: "other", Seq: 1}, 3)
	four := idBatch(4)
	defer four.Release()
	if _, err := tb.Append(ctx, four); err != nil {
		t.Fatal(err)
	}
	if _, _, err := tb.Delete(ctx, expr.Eq("id", value.Int(4))); err != nil {
		t.Fatal(err)
	}
	if _, err := tb.CreateIndex(ctx, "id"); err != nil {
		t.Fatal(err)
	}
	// A rewrite of every fragment into one, as a compaction commits it.
	cur := tb.Current()
	var removed []uint64
	for _, f := range cur.Manifest().Fragments {
		removed = append(removed, f.ID)
	}
	rows := idBatch(1, 2, 3)
	frag, err := fragment.Write(ctx, b, idSchema, rows)
	rows.Release()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tb.Commit(ctx, format.Transaction{Kind: format.KindRewrite, Added: []format.Fragment{frag}, Removed: removed}); err != nil {
		t.Fatal(err)
	}
	if r := appendOnce(t, tb, key, 1, 2); !r.Duplicate || r.Version != 2 {
		t.Fatalf("after a delete, an index and a rewrite: %+v, want a duplicate of v2", r)
	}
	latest, err := table.LatestVersion(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	for v := uint64(2); v <= latest; v++ {
		prev, err := table.ReadManifest(ctx, b, v-1)
		if err != nil {
			t.Fatal(err)
		}
		m, err := table.ReadManifest(ctx, b, v)
		if err != nil {
			t.Fatal(err)
		}
		replayed, err := commit.Replay(prev, &m.Transaction)
		if err != nil {
			t.Fatalf("replay of v%d: %v", v, err)
		}
		if !slices.EqualFunc(replayed.Producers, m.Producers, sameRecord) || len(m.Producers) == 0 && v > 2 {
			t.Fatalf("v%d: replayed producers %+v, stored %+v", v, replayed.Producers, m.Producers)
		}
	}
}

func sameRecord(a, b format.ProducerRecord) bool {
	return a.Producer == b.Producer && a.Time.Equal(b.Time) && slices.Equal(a.Recent, b.Recent)
}

func TestACreateSentAgainUnderItsKeyAnswersItsVersion(t *testing.T) {
	b := open(t, "mem://")
	key := format.Idempotency{Producer: "creator"}
	rows := idBatch(1, 2)
	defer rows.Release()
	m, dup, err := commit.CreateOnce(ctx, b, idSchema, nil, nil, key, rows)
	if err != nil || dup || m.Version != 1 {
		t.Fatalf("create: v%v, duplicate %v, %v", m, dup, err)
	}
	m, dup, err = commit.CreateOnce(ctx, b, idSchema, nil, nil, key, rows)
	if err != nil || !dup || m.Version != 1 || m.Rows() != 2 {
		t.Fatalf("create sent again: %v, duplicate %v, %v; want version 1, a duplicate", m, dup, err)
	}
	other := idBatch(3)
	defer other.Release()
	if _, _, err := commit.CreateOnce(ctx, b, idSchema, nil, nil, key, other); !errors.Is(err, format.ErrKeyReused) {
		t.Fatalf("create with other rows under the key: %v, want ErrKeyReused", err)
	}
	if _, _, err := commit.CreateOnce(ctx, b, idSchema, nil, nil, format.Idempotency{Producer: "another"}, rows); !errors.Is(err, format.ErrExists) {
		t.Fatalf("create under another key: %v, want ErrExists", err)
	}
	if _, err := commit.Create(ctx, b, idSchema, nil, nil, rows); !errors.Is(err, format.ErrExists) {
		t.Fatalf("create without a key: %v, want ErrExists", err)
	}
}

// A named append stalls so long that garbage collection deletes its
// fragment before its manifest lands; its writer dies right after the
// create, before it could take the commit back. The version records the
// append's name, but its rows are gone: the caller's retry must not be
// told "stored". It takes the dead commit back and stores the rows.
func TestARetryOfAnAppendWhoseDataWasLostStoresItAgain(t *testing.T) {
	under := open(t, "mem://")
	createIDTable(t, under)
	var landed atomic.Bool
	dying := fault.Wrap(under, fault.InjectorFunc(func(op fault.Op, key string) fault.Fault {
		if landed.Load() {
			return fault.Fault{Action: fault.Crash}
		}
		if op == fault.OpPutIfAbsent && strings.HasPrefix(key, "_versions/") {
			for o, err := range blob.List(ctx, under, "data/", 0) {
				if err == nil {
					_ = under.Delete(ctx, o.Key)
				}
			}
			landed.Store(true)
		}
		return fault.Fault{}
	}))
	later := func() time.Time { return time.Now().Add(10 * time.Minute) }
	tb, err := commit.OpenTable(ctx, dying, &commit.Options{Now: later})
	if err != nil {
		t.Fatal(err)
	}
	key := format.Idempotency{Producer: "stalled"}
	rec := idBatch(7, 8, 9)
	defer rec.Release()
	if _, err := tb.AppendOnce(ctx, key, rec); err == nil {
		t.Fatal("the writer died after its create, yet its append succeeded")
	}
	retry, err := commit.OpenTable(ctx, under, &commit.Options{Now: later})
	if err != nil {
		t.Fatal(err)
	}
	res, err := retry.AppendOnce(ctx, key, rec)
	if err != nil || res.Duplicate {
		t.Fatalf("retry of an append whose data was lost: %+v, %v; want it stored anew", res, err)
	}
	if got := latestIDs(t, under); !slices.Equal(got, []int64{7, 8, 9}) {
		t.Fatalf("table holds %v, want 7, 8, 9 once", got)
	}
}

// A handle that last saw the version of its named append retries it, hours
// later, after that append was taken back (its data lost in a stall) and a
// collection took both versions: the handle's version and the one after
// it gone, the retry must catch up, not take the collected version for a
// stored append (simulation seed 4987, which lost the rows so).
func TestARetryFromAStaleHandleAfterItsAppendWasTakenBackAndCollected(t *testing.T) {
	b := open(t, "mem://")
	createIDTable(t, b)
	var offset atomic.Int64
	now := func() time.Time { return time.Now().Add(time.Duration(offset.Load())) }
	tb, err := commit.OpenTable(ctx, b, &commit.Options{Now: now})
	if err != nil {
		t.Fatal(err)
	}
	key := format.Idempotency{Producer: "stale", Seq: 1}
	first := appendOnce(t, tb, key, 7, 8, 9)                         // v2, the handle's newest
	if err := commit.Undo(ctx, b, first.Manifest, nil); err != nil { // v3: taken back, the name forgotten
		t.Fatal(err)
	}
	other, err := commit.OpenTable(ctx, b, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 { // v4..v6
		rec := idBatch(int64(100 + i))
		if _, err := other.Append(ctx, rec); err != nil {
			t.Fatal(err)
		}
		rec.Release()
	}
	offset.Store(int64(2 * time.Hour))
	gc, err := compactor.GC(ctx, b, &compactor.GCPolicy{KeepVersions: 2}, now())
	if err != nil || !slices.Contains(gc.VersionsDeleted, 2) || !slices.Contains(gc.VersionsDeleted, 3) {
		t.Fatalf("the collection: %v, %v; want v2 and v3 collected", gc.VersionsDeleted, err)
	}
	res := appendOnce(t, tb, key, 7, 8, 9)
	if res.Duplicate {
		t.Fatalf("the retry was told its append was stored at v%d, which was taken back", res.Version)
	}
	if got := latestIDs(t, b); !slices.Equal(got, []int64{7, 8, 9, 100, 101, 102}) {
		t.Fatalf("table holds %v, want 7, 8, 9 and 100..102 once", got)
	}
}

// A retry whose handle found its name recorded, while a newer version
// forgot it by age (another producer's append, two hours on, applied the
// window): the version that stored it stands and nothing took it back, so
// the retry is told so and stores nothing. Asking the newer version's
// record instead, it found no name and stored the rows a second time
// (simulation seed 189624: the retry stalled past the window).
func TestARetryThatOutwaitsTheWindowFindsItsAppendStored(t *testing.T) {
	b := open(t, "mem://")
	createIDTable(t, b)
	var offset atomic.Int64
	now := func() time.Time { return time.Now().Add(time.Duration(offset.Load())) }
	first, err := commit.OpenTable(ctx, b, &commit.Options{Now: now})
	if err != nil {
		t.Fatal(err)
	}
	key := format.Idempotency{Producer: "slow", Seq: 1}
	stored := appendOnce(t, first, key, 7, 8, 9) // v2: its answer lost
	retry, err := commit.OpenTable(ctx, b, &commit.Options{Now: now})
	if err != nil {
		t.Fatal(err)
	}
	offset.Store(int64(2 * time.Hour))
	appendOnce(t, first, format.Idempotency{Producer: "other", Seq: 1}, 100) // v3: "slow" idle past the window
	cur, err := table.ReadLatest(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	if slices.ContainsFunc(cur.Producers, func(r format.ProducerRecord) bool { return r.Producer == "slow" }) {
		t.Fatalf("v%d still records the name: the window was not applied", cur.Version)
	}
	res := appendOnce(t, retry, key, 7, 8, 9)
	if !res.Duplicate || res.Version != stored.Version {
		t.Fatalf("the retry: %+v; want told its append was stored at v%d", res, stored.Version)
	}
	if got := latestIDs(t, b); !slices.Equal(got, []int64{7, 8, 9, 100}) {
		t.Fatalf("table holds %v, want 7, 8, 9 and 100 once", got)
	}
}
