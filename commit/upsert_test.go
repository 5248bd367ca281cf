package commit_test

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/blob/trace"
	"github.com/stratadb/strata/commit"
	"github.com/stratadb/strata/compactor"
	"github.com/stratadb/strata/harness/testenv"
	"github.com/stratadb/strata/table"
	"github.com/stratadb/strata/table/changes"
	"github.com/stratadb/strata/table/evolve"
	"github.com/stratadb/strata/table/expr"
	"github.com/stratadb/strata/table/format"
	"github.com/stratadb/strata/table/fragment"
)

var kvSchema = arrow.NewSchema([]arrow.Field{
	{Name: "id", Type: arrow.PrimitiveTypes.Int64},
	{Name: "run", Type: arrow.BinaryTypes.String},
	{Name: "reward", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
}, nil)

// kv is one row of kvSchema.
type kv struct {
	id     int64
	run    string
	reward float64
}

func kvBatch(rows ...kv) arrow.RecordBatch {
	b := array.NewRecordBuilder(testenv.Arrow, kvSchema)
	defer b.Release()
	for _, r := range rows {
		b.Field(0).(*array.Int64Builder).Append(r.id)
		b.Field(1).(*array.StringBuilder).Append(r.run)
		b.Field(2).(*array.Float64Builder).Append(r.reward)
	}
	return b.NewRecordBatch()
}

// kvRows reads version v (0: the latest) as rows by "id/run", counting
// each key's rows.
func kvRows(t *testing.T, b blob.Bucket, v uint64) (map[string]float64, map[string]int) {
	t.Helper()
	s, err := table.Open(ctx, b, &table.OpenOptions{Version: v})
	if err != nil {
		t.Fatal(err)
	}
	vals, n := map[string]float64{}, map[string]int{}
	for rec, err := range s.Scan(ctx, table.ScanOptions{}) {
		if err != nil {
			t.Fatal(err)
		}
		for i := range int(rec.NumRows()) {
			k := fmt.Sprintf("%d/%s", rec.Column(0).(*array.Int64).Value(i), rec.Column(1).(*array.String).Value(i))
			vals[k] = rec.Column(2).(*array.Float64).Value(i)
			n[k]++
		}
	}
	return vals, n
}

func newKVTable(t testing.TB, b blob.Bucket) *commit.Table {
	t.Helper()
	if _, err := commit.Create(ctx, b, kvSchema, nil, nil); err != nil {
		t.Fatal(err)
	}
	tb, err := commit.OpenTable(ctx, b, nil)
	if err != nil {
		t.Fatal(err)
	}
	return tb
}

func upsert(t *testing.T, tb *commit.Table, keys []string, rows ...kv) commit.UpsertResult {
	t.Helper()
	rec := kvBatch(rows...)
	defer rec.Release()
	res, err := tb.Upsert(ctx, keys, rec)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// An upsert replaces the rows of the keys it writes and inserts the
// others, in one commit; keys of one or more columns; its changes are the
// replaced rows deleted and its own inserted; a null key, a key twice in
// one upsert, a missing or float key column are refused before anything
// is written.
func TestUpsertReplacesRowsByKey(t *testing.T) {
	b := open(t, "mem://")
	tb := newKVTable(t, b)
	res := upsert(t, tb, []string{"id"}, kv{1, "a", 0.1}, kv{2, "a", 0.2}) // v2
	if res.Version != 2 || res.Inserted != 2 || res.Replaced != 0 {
		t.Fatalf("first upsert: %+v", res)
	}
	res = upsert(t, tb, []string{"id"}, kv{2, "b", 2.0}, kv{3, "b", 3.0}) // v3
	if res.Version != 3 || res.Inserted != 2 || res.Replaced != 1 {
		t.Fatalf("second upsert: %+v", res)
	}
	vals, n := kvRows(t, b, 0)
	want := map[string]float64{"1/a": 0.1, "2/b": 2.0, "3/b": 3.0}
	if !maps.Equal(vals, want) || len(n) != 3 {
		t.Fatalf("after two upserts by id: %v %v, want %v", vals, n, want)
	}
	// By two columns: (3, "b") is replaced, (3, "c") is new.
	res = upsert(t, tb, []string{"id", "run"}, kv{3, "b", 30}, kv{3, "c", 31}) // v4
	if res.Replaced != 1 || res.Inserted != 2 {
		t.Fatalf("upsert by (id, run): %+v", res)
	}
	vals, _ = kvRows(t, b, 0)
	want = map[string]float64{"1/a": 0.1, "2/b": 2.0, "3/b": 30, "3/c": 31}
	if !maps.Equal(vals, want) {
		t.Fatalf("after an upsert by (id, run): %v, want %v", vals, want)
	}
	var got []string
	for c, err := range changes.Changes(ctx, b, 2, 3, changes.ChangesOptions{}) {
		if err != nil {
			t.Fatal(err)
		}
		for i := range int(c.Rows.NumRows()) {
			got = append(got, fmt.Sprintf("%s %d/%s", c.Kind, c.Rows.Column(0).(*array.Int64).Value(i), c.Rows.Column(1).(*array.String).Value(i)))
		}
	}
	if !slices.Equal(got, []string{"delete 2/a", "insert 2/b", "insert 3/b"}) {
		t.Fatalf("the changes of an upsert: %v", got)
	}

	before, _ := table.LatestVersion(ctx, b)
	for name, c := range map[string]struct {
		keys []string
		rows []kv
	}{
		"a key twice":      {[]string{"id"}, []kv{{7, "x", 1}, {7, "y", 2}}},
		"no key column":    {nil, []kv{{7, "x", 1}}},
		"a missing column": {[]string{"nope"}, []kv{{7, "x", 1}}},
		"a float key":      {[]string{"reward"}, []kv{{7, "x", 1}}},
		"a column twice":   {[]string{"id", "id"}, []kv{{7, "x", 1}}},
	} {
		rec := kvBatch(c.rows...)
		_, err := tb.Upsert(ctx, c.keys, rec)
		rec.Release()
		var in *evolve.InputError
		if !errors.As(err, &in) {
			t.Errorf("%s: %v, want a *table.InputError", name, err)
		}
	}
	nullKey := func() arrow.RecordBatch {
		b := array.NewRecordBuilder(testenv.Arrow, kvSchema)
		defer b.Release()
		b.Field(0).(*array.Int64Builder).Append(8)
		b.Field(1).(*array.StringBuilder).Append("x")
		b.Field(2).(*array.Float64Builder).AppendNull()
		return b.NewRecordBatch()
	}()
	defer nullKey.Release()
	var in *evolve.InputError
	if _, err := tb.Upsert(ctx, []string{"reward"}, nullKey); !errors.As(err, &in) {
		t.Errorf("a float (and null) key: %v", err)
	}
	if after, _ := table.LatestVersion(ctx, b); after != before {
		t.Fatalf("refused upserts committed: v%d -> v%d", before, after)
	}
}

// Four writers upsert overlapping keys (a few hot) at once while a
// compaction runs between their rounds: each key ends with one row, and
// that row is the one of the upsert that committed last (the highest
// version among those that wrote the key).
func TestConcurrentUpsertsLeaveOneRowPerKeyTheLastCommitted(t *testing.T) {
	b := open(t, "file://"+t.TempDir())
	newKVTable(t, b)
	const writers, rounds = 4, 12
	type write struct {
		version uint64
		reward  float64
	}
	var mu sync.Mutex
	last := map[int64]write{}
	round := newBarrier(writers)
	var wg sync.WaitGroup
	errs := make(chan error, writers+1)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tb, err := commit.OpenTable(ctx, b, &commit.Options{Writer: fmt.Sprintf("w%d", w), Budget: 2 * time.Minute, MaxAttempts: 1000, MaxReplans: 1000})
			if err != nil {
				errs <- err
				return
			}
			for r := range rounds {
				// Keys 0..3 are hot (every upsert writes one); 100+r is
				// new in round r, and every writer writes it at once
				// (they start each round together); the rest spread
				// over 4..39.
				round.Wait(r)
				ids := []int64{int64(r % 4), int64(100 + r), int64(4 + (w*7+r*3)%36), int64(4 + (w*11+r*5)%36)}
				ids = slices.Compact(slices.Sorted(slices.Values(ids)))
				var rows []kv
				for _, id := range ids {
					rows = append(rows, kv{id, "r", float64(w*1000 + r)})
				}
				rec := kvBatch(rows...)
				res, err := tb.Upsert(ctx, []string{"id"}, rec)
				rec.Release()
				if err != nil {
					errs <- fmt.Errorf("writer %d round %d: %w", w, r, err)
					return
				}
				mu.Lock()
				for _, row := range rows {
					if cur, ok := last[row.id]; !ok || res.Version > cur.version {
						last[row.id] = write{res.Version, row.reward}
					}
				}
				mu.Unlock()
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for range 5 {
			if _, err := compactor.Compact(ctx, b, &compactor.Policy{MinFragments: 2}, &compactor.Options{Commit: commit.Options{Writer: "compactor"}}); err != nil && !commit.IsRetryableConflict(err) {
				errs <- fmt.Errorf("compaction: %w", err)
				return
			}
			time.Sleep(5 * time.Millisecond)
		}
	}()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	vals, n := kvRows(t, b, 0)
	if len(vals) != len(last) {
		t.Fatalf("%d keys in the table, %d upserted", len(vals), len(last))
	}
	for id, w := range last {
		k := fmt.Sprintf("%d/r", id)
		if n[k] != 1 || vals[k] != w.reward {
			t.Fatalf("key %d: %d rows, reward %v; the last upsert of it (v%d) wrote %v", id, n[k], vals[k], w.version, w.reward)
		}
	}
}

// An upsert taken back (its rows collected while it stalled) gives the
// rows it replaced back: the table is as if it never ran.
func TestUndoOfAnUpsertGivesItsReplacedRowsBack(t *testing.T) {
	b := open(t, "mem://")
	tb := newKVTable(t, b)
	upsert(t, tb, []string{"id"}, kv{1, "a", 1}, kv{2, "a", 2}) // v2
	upsert(t, tb, []string{"id"}, kv{2, "a", 3})                // v3: replaces 2's row
	want, _ := kvRows(t, b, 2)
	res := upsert(t, tb, []string{"id"}, kv{1, "a", 10}, kv{2, "a", 20}, kv{5, "a", 50}) // v4
	if err := commit.Undo(ctx, b, res.Manifest, nil); err != nil {                       // v5
		t.Fatal(err)
	}
	got, n := kvRows(t, b, 5)
	want["2/a"] = 3
	if !maps.Equal(got, want) || n["2/a"] != 1 {
		t.Fatalf("after the upsert of v4 was taken back: %v %v, want %v", got, n, want)
	}
}

// An upsert taken back gives back only the replaced rows whose keys no
// later upsert wrote again: a key a later upsert replaced keeps that
// upsert's row alone, not it and the row given back. The same when garbage
// collection took the upsert's vector (why it is taken back) and nothing
// changed that fragment since: the take-back, planned again on the latest
// version, gives the fragment its vector from before without reading the
// one that is gone.
func TestUndoOfAnUpsertKeepsDeletedTheKeysALaterUpsertWrote(t *testing.T) {
	for _, vectorGone := range []bool{false, true} {
		t.Run(fmt.Sprintf("vector gone %v", vectorGone), func(t *testing.T) {
			b := open(t, "mem://")
			tb := newKVTable(t, b)
			upsert(t, tb, []string{"id"}, kv{1, "a", 1}, kv{2, "a", 2}, kv{3, "a", 3}) // v2
			res := upsert(t, tb, []string{"id"}, kv{1, "a", 10}, kv{2, "a", 20})       // v3, to be taken back
			upsert(t, tb, []string{"id"}, kv{2, "a", 30})                              // v4: replaces 2 again, in v3's fragment
			for _, d := range res.Manifest.Transaction.Deletions {
				if !vectorGone {
					break
				}
				if err := b.Delete(ctx, d.Deletion.Key); err != nil {
					t.Fatal(err)
				}
			}
			if err := commit.Undo(ctx, b, res.Manifest, nil); err != nil { // v5
				t.Fatal(err)
			}
			got, n := kvRows(t, b, 5)
			want := map[string]float64{"1/a": 1, "2/a": 30, "3/a": 3}
			if !maps.Equal(got, want) || n["1/a"] != 1 || n["2/a"] != 1 || n["3/a"] != 1 {
				t.Fatalf("after the upsert of v3 was taken back: %v (rows per key %v), want %v", got, n, want)
			}
		})
	}
}

// An upsert taken back after a compaction rewrote a fragment it deleted
// rows from (the compaction's output holds that fragment's live rows,
// without them): the rows come back, in a copy of the fragment as it was
// before the upsert that holds them alone. Looked for in the latest
// version, the fragment was not there, and the take-back failed for good
// (simulation seed 158704). The upsert's own fragment is gone (garbage
// collection took it: why it is taken back), so it never held readable
// rows, and the changes from before it through the take-back change
// nothing: the rows given back never left a follower's copy.
func TestUndoOfAnUpsertGivesBackRowsACompactionDroppedSince(t *testing.T) {
	b := open(t, "mem://")
	tb := newKVTable(t, b)
	first := upsert(t, tb, []string{"id"}, kv{1, "a", 1}, kv{2, "a", 2}, kv{3, "a", 3}) // v2
	res := upsert(t, tb, []string{"id"}, kv{1, "a", 10}, kv{2, "a", 20})                // v3, to be taken back
	// v4: the first upsert's fragment rewritten, its live row (3) alone.
	cur, err := table.ReadLatest(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	src := first.Manifest.Transaction.Added[0].ID
	var recs []arrow.RecordBatch
	for rec, err := range table.NewSnapshot(b, cur).Scan(ctx, table.ScanOptions{Fragments: []uint64{src}}) {
		if err != nil {
			t.Fatal(err)
		}
		rec.Retain()
		recs = append(recs, rec)
	}
	out, err := fragment.Write(ctx, b, cur.Schema(), recs...)
	for _, rec := range recs {
		rec.Release()
	}
	if err != nil || out.Rows != 1 {
		t.Fatalf("the rewrite of fragment %d: %+v %v, want its one live row", src, out, err)
	}
	if _, err := commit.Commit(ctx, b, cur, format.Transaction{Kind: format.KindRewrite, Removed: []uint64{src}, Added: []format.Fragment{out}}, nil); err != nil {
		t.Fatal(err)
	}
	if err := b.Delete(ctx, res.Manifest.Transaction.Added[0].Key); err != nil {
		t.Fatal(err)
	}
	if err := commit.Undo(ctx, b, res.Manifest, nil); err != nil { // v5
		t.Fatal(err)
	}
	got, n := kvRows(t, b, 5)
	want := map[string]float64{"1/a": 1, "2/a": 2, "3/a": 3}
	if !maps.Equal(got, want) || n["1/a"] != 1 || n["2/a"] != 1 || n["3/a"] != 1 {
		t.Fatalf("after the upsert of v3 was taken back: %v (rows per key %v), want %v", got, n, want)
	}
	changed := 0
	for c, err := range changes.Changes(ctx, b, 2, 5, changes.ChangesOptions{}) {
		if err != nil {
			t.Fatal(err)
		}
		changed += int(c.Rows.NumRows())
		c.Rows.Release()
	}
	if changed != 0 {
		t.Fatalf("the changes from v2 through the take-back: %d rows, want none", changed)
	}
}

// barrier lets n goroutines start each round together.
type barrier struct {
	mu      sync.Mutex
	cond    *sync.Cond
	n       int
	arrived map[int]int
}

func newBarrier(n int) *barrier {
	b := &barrier{n: n, arrived: map[int]int{}}
	b.cond = sync.NewCond(&b.mu)
	return b
}

// Wait returns once n goroutines have called it for round r.
func (b *barrier) Wait(r int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.arrived[r]++
	b.cond.Broadcast()
	for b.arrived[r] < b.n {
		b.cond.Wait()
	}
}

// An update sets columns of the matching rows in one commit: they are
// deleted and written again, assigned; its changes say so; assignments
// that do not fit the schema are refused before anything is written, and
// an update that matches nothing commits nothing.
func TestUpdateSetsColumnsOfTheMatchingRows(t *testing.T) {
	b := open(t, "mem://")
	tb := newKVTable(t, b)
	upsert(t, tb, []string{"id"}, kv{1, "a", 0.1}, kv{2, "b", 0.2}, kv{3, "c", 0.3}) // v2
	set, err := expr.ParseAssignments("reward = 1.5, run = 'z'")
	if err != nil {
		t.Fatal(err)
	}
	pred, err := expr.ParseFilter("id >= 2")
	if err != nil {
		t.Fatal(err)
	}
	res, err := tb.Update(ctx, pred, set) // v3
	if err != nil || res.Updated != 2 || res.Version != 3 {
		t.Fatalf("update: %+v %v", res, err)
	}
	vals, n := kvRows(t, b, 0)
	want := map[string]float64{"1/a": 0.1, "2/z": 1.5, "3/z": 1.5}
	if !maps.Equal(vals, want) || len(n) != 3 {
		t.Fatalf("after the update: %v, want %v", vals, want)
	}
	var kinds []string
	for c, err := range changes.Changes(ctx, b, 2, 3, changes.ChangesOptions{}) {
		if err != nil {
			t.Fatal(err)
		}
		kinds = append(kinds, fmt.Sprintf("%s %d", c.Kind, c.Rows.NumRows()))
	}
	if !slices.Equal(kinds, []string{"delete 2", "insert 2"}) {
		t.Fatalf("the changes of an update: %v", kinds)
	}
	set, _ = expr.ParseAssignments("reward = null")
	if res, err := tb.Update(ctx, pred, set); err != nil || res.Updated != 2 {
		t.Fatalf("setting a nullable column to null: %+v %v", res, err)
	}
	none, _ := expr.ParseFilter("id > 100")
	if res, err := tb.Update(ctx, none, set); err != nil || !res.Done || res.Version != 4 {
		t.Fatalf("an update matching nothing: %+v %v", res, err)
	}
	for _, bad := range []string{"id = null", "nope = 1", "id = 'x'", "reward = 1, reward = 2"} {
		set, err := expr.ParseAssignments(bad)
		if err == nil {
			_, err = tb.Update(ctx, pred, set)
		}
		if !errors.Is(err, expr.ErrBadAssignment) {
			t.Errorf("%s: %v, want ErrBadAssignment", bad, err)
		}
	}
	if v, _ := table.LatestVersion(ctx, b); v != 4 {
		t.Fatalf("refused updates committed: latest v%d", v)
	}
}

// With a key index on the key column, an upsert finds the rows the index
// covers through it — reading no data object of those fragments — and
// scans the fragments added since; through a compaction's remap too.
func TestUpsertFindsKeysThroughTheIndex(t *testing.T) {
	under := open(t, "mem://")
	tb := newKVTable(t, under)
	for i := range 4 { // v2..v5: ids 0..39
		var rows []kv
		for j := range 10 {
			rows = append(rows, kv{int64(i*10 + j), "a", 0})
		}
		upsert(t, tb, []string{"id"}, rows...)
	}
	if _, err := tb.CreateIndex(ctx, "id"); err != nil { // v6
		t.Fatal(err)
	}
	if _, err := compactor.Compact(ctx, under, &compactor.Policy{MinFragments: 2, TargetRows: 20}, nil); err != nil { // v7: two of 20, remapped
		t.Fatal(err)
	}
	appended := kvBatch(kv{40, "a", 0}, kv{41, "a", 0}) // not in the index
	defer appended.Release()
	if _, err := tb.Append(ctx, appended); err != nil {
		t.Fatal(err)
	}
	tr := trace.Wrap(under)
	traced, err := commit.OpenTable(ctx, tr, nil)
	if err != nil {
		t.Fatal(err)
	}
	rec := kvBatch(kv{3, "b", 1}, kv{25, "b", 1}, kv{41, "b", 1}, kv{99, "b", 1})
	defer rec.Release()
	var res commit.UpsertResult
	lines, err := tr.Record(func() (err error) { res, err = traced.Upsert(ctx, []string{"id"}, rec); return err })
	if err != nil || res.Replaced != 3 {
		t.Fatalf("upsert through the index: %+v %v", res, err)
	}
	m, _ := table.ReadLatest(ctx, under)
	unindexed := m.Fragments[len(m.Fragments)-2].Key // the append of 40, 41
	scanned := 0
	for _, l := range lines {
		if strings.Contains(l, unindexed) {
			scanned++
		}
		if strings.Contains(l, "data/") && strings.Contains(l, "GET") && !strings.Contains(l, unindexed) && !strings.Contains(l, "PUT") {
			t.Errorf("the upsert read an indexed fragment's data: %s", l)
		}
	}
	if scanned == 0 {
		t.Errorf("the upsert did not read the fragment the index lacks:\n%s", strings.Join(lines, "\n"))
	}
	vals, n := kvRows(t, under, 0)
	for _, k := range []string{"3/b", "25/b", "41/b", "99/b"} {
		if vals[k] != 1 || n[k] != 1 {
			t.Errorf("%s: %d rows, %v", k, n[k], vals[k])
		}
	}
	for _, k := range []string{"3/a", "25/a", "41/a"} {
		if n[k] != 0 {
			t.Errorf("%s is still there", k)
		}
	}
	if len(n) != 43 {
		t.Errorf("%d keys, want 43", len(n))
	}
}

// An upsert of keys this process upserted before finds them in its own
// fragments (which no key index covers yet) without reading them.
func TestUpsertFindsItsOwnEarlierKeysWithoutReadingThem(t *testing.T) {
	under := open(t, "mem://")
	tr := trace.Wrap(under)
	if _, err := commit.Create(ctx, tr, kvSchema, nil, nil); err != nil {
		t.Fatal(err)
	}
	tb, err := commit.OpenTable(ctx, tr, nil)
	if err != nil {
		t.Fatal(err)
	}
	upsert(t, tb, []string{"id", "run"}, kv{1, "a", 1}, kv{2, "a", 1})
	rec := kvBatch(kv{2, "a", 2}, kv{3, "a", 2})
	defer rec.Release()
	var res commit.UpsertResult
	lines, err := tr.Record(func() (err error) { res, err = tb.Upsert(ctx, []string{"id", "run"}, rec); return err })
	if err != nil || res.Replaced != 1 {
		t.Fatalf("upsert: %+v %v", res, err)
	}
	for _, l := range lines {
		if strings.HasPrefix(l, "GET") && strings.Contains(l, " data/") {
			t.Errorf("the upsert read a fragment it wrote: %s", l)
		}
	}
	vals, n := kvRows(t, under, 0)
	if n["2/a"] != 1 || vals["2/a"] != 2 || n["1/a"] != 1 || n["3/a"] != 1 {
		t.Errorf("rows: %v %v", vals, n)
	}
}
