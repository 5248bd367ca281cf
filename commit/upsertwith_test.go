package commit_test

import (
	"errors"
	"maps"
	"strings"
	"testing"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/commit"
	"github.com/stratadb/strata/table"
	"github.com/stratadb/strata/table/evolve"
	"github.com/stratadb/strata/table/expr"
	"github.com/stratadb/strata/table/format"
)

func upsertWith(t *testing.T, tb *commit.Table, c commit.UpsertClauses, rows ...kv) commit.UpsertResult {
	t.Helper()
	rec := kvBatch(rows...)
	defer rec.Release()
	res, err := tb.UpsertWith(ctx, nil, []string{"id"}, c, rec)
	if err != nil {
		t.Fatalf("upsert with %+v: %v", c, err)
	}
	return res
}

func wantRows(t *testing.T, tb *commit.Table, what string, want map[string]float64) {
	t.Helper()
	got, n := kvRows(t, tb.Bucket(), 0)
	if !maps.Equal(got, want) {
		t.Fatalf("%s: %v, want %v", what, got, want)
	}
	for k, c := range n {
		if c != 1 {
			t.Fatalf("%s: %s has %d rows", what, k, c)
		}
	}
}

// An upsert with clauses does what they say, each alone and together: an
// insert of the keys the table lacks only, an update of the keys it has
// only, an update under a condition over both rows (target.reward <
// source.reward), and a delete of the rows the source lacks (under a
// condition on them); clauses that do nothing and conditions that do not
// bind are refused with nothing committed.
func TestAnUpsertWithClausesDoesWhatTheySay(t *testing.T) {
	tb := newKVTable(t, open(t, "file://"+t.TempDir()))
	upsert(t, tb, []string{"id"}, kv{1, "a", 1}, kv{2, "a", 2}, kv{3, "a", 3}, kv{4, "a", 4})

	res := upsertWith(t, tb, commit.UpsertClauses{InsertUnmatched: true}, kv{4, "b", 40}, kv{5, "b", 5})
	if res.Inserted != 1 || res.Updated != 0 || res.Replaced != 0 {
		t.Fatalf("insert only: %+v", res)
	}
	wantRows(t, tb, "insert only", map[string]float64{"1/a": 1, "2/a": 2, "3/a": 3, "4/a": 4, "5/b": 5})

	res = upsertWith(t, tb, commit.UpsertClauses{UpdateMatched: true}, kv{2, "c", 20}, kv{9, "c", 9})
	if res.Inserted != 0 || res.Updated != 1 || res.Replaced != 1 {
		t.Fatalf("update only: %+v", res)
	}
	wantRows(t, tb, "update only", map[string]float64{"1/a": 1, "2/c": 20, "3/a": 3, "4/a": 4, "5/b": 5})

	res = upsertWith(t, tb, commit.UpsertClauses{UpdateMatched: true, MatchedIf: "target.reward < source.reward", InsertUnmatched: true},
		kv{2, "d", 7}, kv{3, "d", 30}, kv{6, "d", 6})
	if res.Inserted != 1 || res.Updated != 1 || res.Replaced != 1 {
		t.Fatalf("update if newer, and insert: %+v", res)
	}
	wantRows(t, tb, "update if newer", map[string]float64{"1/a": 1, "2/c": 20, "3/d": 30, "4/a": 4, "5/b": 5, "6/d": 6})

	res = upsertWith(t, tb, commit.UpsertClauses{UpdateMatched: true, InsertUnmatched: true, DeleteUnmatchedBySource: true, BySourceIf: "reward < 5"},
		kv{1, "e", 10}, kv{7, "e", 7})
	if res.Inserted != 1 || res.Updated != 1 || res.Deleted != 1 {
		t.Fatalf("sync, deleting the small rows the source lacks: %+v", res)
	}
	wantRows(t, tb, "delete by source if", map[string]float64{"1/e": 10, "2/c": 20, "3/d": 30, "5/b": 5, "6/d": 6, "7/e": 7})

	res = upsertWith(t, tb, commit.UpsertClauses{DeleteUnmatchedBySource: true}, kv{2, "x", 0}, kv{3, "x", 0})
	if res.Deleted != 4 || res.Inserted != 0 || res.Updated != 0 {
		t.Fatalf("delete by source alone: %+v", res)
	}
	wantRows(t, tb, "delete by source", map[string]float64{"2/c": 20, "3/d": 30})

	v := tb.Current().Version()
	if res := upsertWith(t, tb, commit.UpsertClauses{InsertUnmatched: true}, kv{2, "y", 0}); !res.Done || res.Version != v {
		t.Fatalf("an upsert with nothing to do: %+v", res)
	}
	for _, c := range []commit.UpsertClauses{
		{},
		{UpdateMatched: true, MatchedIf: "target.nope < 1"},
		{UpdateMatched: true, MatchedIf: "reward <"},
		{DeleteUnmatchedBySource: true, BySourceIf: "source.reward > 1"},
	} {
		rec := kvBatch(kv{2, "z", 0})
		_, err := tb.UpsertWith(ctx, nil, []string{"id"}, c, rec)
		rec.Release()
		if !errors.Is(err, commit.ErrBadClauses) {
			t.Errorf("upsert with %+v: %v, want ErrBadClauses", c, err)
		}
	}
	rec := kvBatch(kv{8, "z", 0}, kv{8, "z", 1})
	defer rec.Release()
	if _, err := tb.UpsertWith(ctx, nil, []string{"id"}, commit.UpsertClauses{InsertUnmatched: true}, rec); !errors.Is(err, evolve.ErrBadInput) {
		t.Fatalf("a key twice in the source: %v", err)
	}
	if tb.Current().Version() != v {
		t.Fatalf("refused upserts committed: v%d, then v%d", v, tb.Current().Version())
	}
}

// An upsert with clauses planned before rows land plans again: an insert
// of a key another writer appended meanwhile inserts nothing (the key
// keeps one row), and one that deletes the rows its source lacks deletes
// the rows appended meanwhile too, as if it had run after them.
func TestAnUpsertWithClausesSeesRowsThatLandedWhileItPlanned(t *testing.T) {
	b := open(t, "file://"+t.TempDir())
	tb := newKVTable(t, b)
	upsert(t, tb, []string{"id"}, kv{1, "a", 1})
	stale, err := commit.OpenTable(ctx, b, nil)
	if err != nil {
		t.Fatal(err)
	}
	rec := kvBatch(kv{50, "other", 5})
	if _, err := tb.Append(ctx, rec); err != nil {
		t.Fatal(err)
	}
	rec.Release()
	if res := upsertWith(t, stale, commit.UpsertClauses{InsertUnmatched: true}, kv{50, "mine", 6}); res.Inserted != 0 || !res.Done {
		t.Fatalf("an insert of a key appended meanwhile: %+v", res)
	}
	wantRows(t, tb, "insert of a key appended meanwhile", map[string]float64{"1/a": 1, "50/other": 5})

	stale, err = commit.OpenTable(ctx, b, nil)
	if err != nil {
		t.Fatal(err)
	}
	rec = kvBatch(kv{60, "late", 6})
	if _, err := tb.Append(ctx, rec); err != nil {
		t.Fatal(err)
	}
	rec.Release()
	res := upsertWith(t, stale, commit.UpsertClauses{UpdateMatched: true, InsertUnmatched: true, DeleteUnmatchedBySource: true}, kv{1, "b", 2})
	if res.Deleted != 2 || res.Updated != 1 {
		t.Fatalf("a sync planned before an append: %+v", res)
	}
	wantRows(t, tb, "a sync planned before an append", map[string]float64{"1/b": 2})
	m := stale.Current().Manifest()
	if m.Transaction.Kind != format.KindUpsert || !m.Transaction.DeletesUnmatched {
		t.Fatalf("the sync's transaction: %+v", m.Transaction)
	}
}

// An upsert with clauses plans again after rows it decided on change,
// even where it writes nothing of theirs: an insert that found a key
// present inserts it after all when a delete of that key lands first (it
// read the row's fragment), and an update of present keys updates a key
// another writer inserts first (rows that land are checked against the
// range of all its keys, not only those it writes).
func TestAnUpsertWithClausesPlansAgainWhenWhatItDecidedOnChanges(t *testing.T) {
	b := open(t, "file://"+t.TempDir())
	tb := newKVTable(t, b)
	upsert(t, tb, []string{"id"}, kv{1, "a", 7}, kv{5, "a", 5})
	stale, err := commit.OpenTable(ctx, b, nil)
	if err != nil {
		t.Fatal(err)
	}
	pred, _ := expr.ParseFilter("id = 1")
	if _, _, err := tb.Delete(ctx, pred); err != nil {
		t.Fatal(err)
	}
	res := upsertWith(t, stale, commit.UpsertClauses{InsertUnmatched: true}, kv{1, "b", 1}, kv{9, "b", 9})
	if res.Inserted != 2 {
		t.Fatalf("an insert of a key deleted meanwhile: %+v", res)
	}
	wantRows(t, tb, "an insert of a key deleted meanwhile", map[string]float64{"1/b": 1, "5/a": 5, "9/b": 9})

	stale, err = commit.OpenTable(ctx, b, nil)
	if err != nil {
		t.Fatal(err)
	}
	rec := kvBatch(kv{3, "other", 3})
	if _, err := tb.Append(ctx, rec); err != nil {
		t.Fatal(err)
	}
	rec.Release()
	res = upsertWith(t, stale, commit.UpsertClauses{UpdateMatched: true}, kv{3, "c", 30}, kv{9, "c", 90})
	if res.Updated != 2 || res.Inserted != 0 {
		t.Fatalf("an update of a key inserted meanwhile: %+v", res)
	}
	wantRows(t, tb, "an update of a key inserted meanwhile", map[string]float64{"1/b": 1, "3/c": 30, "5/a": 5, "9/c": 90})
	// The rows of a plan whose commit lost were deleted: every data object
	// is a fragment of some version.
	named := map[string]bool{}
	latest, err := table.LatestVersion(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	for v := uint64(1); v <= latest; v++ {
		m, err := table.ReadManifest(ctx, b, v)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range m.Fragments {
			named[f.Key] = true
		}
	}
	for o, err := range blob.List(ctx, b, format.DataDir, 0) {
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasSuffix(o.Key, ".parquet") && !named[o.Key] {
			t.Errorf("%s is no version's fragment: a lost plan's rows left behind", o.Key)
		}
	}
}
