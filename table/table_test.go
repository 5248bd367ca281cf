package table_test

import (
	"context"
	"errors"
	"math"
	"slices"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/commit"
	"github.com/stratadb/strata/harness/rollouts"
	"github.com/stratadb/strata/harness/testenv"
	"github.com/stratadb/strata/table"
	"github.com/stratadb/strata/table/evolve"
	"github.com/stratadb/strata/table/expr"
	"github.com/stratadb/strata/table/format"
	"github.com/stratadb/strata/table/value"
)

var ctx = context.Background()

func memBucket(t testing.TB) blob.Bucket {
	b, err := blob.Open(ctx, "mem://")
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// newTable creates a rollouts table with `frags` appends of `rows` rows
// from worker 0, ids 0 … frags*rows-1.
func newTable(t testing.TB, b blob.Bucket, frags, rows int) *commit.Table {
	t.Helper()
	if _, err := commit.Create(ctx, b, rollouts.Schema, nil, nil); err != nil {
		t.Fatal(err)
	}
	tb, err := commit.OpenTable(ctx, b, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range frags {
		rec := rollouts.Batch(testenv.Allocator(t), 42, 0, int64(i*rows), rows)
		if _, err := tb.Append(ctx, rec); err != nil {
			t.Fatal(err)
		}
		rec.Release()
	}
	return tb
}

func scanIDs(t testing.TB, s *table.Snapshot, opts table.ScanOptions) []int64 {
	t.Helper()
	var ids []int64
	for rec, err := range s.Scan(ctx, opts) {
		if err != nil {
			t.Fatalf("scan: %v", err)
		}
		col := rec.Column(rec.Schema().FieldIndices("id")[0]).(*array.Int64)
		ids = append(ids, col.Int64Values()...)
	}
	return ids
}

func TestAppendThenScanReturnsEveryRowWithEveryColumn(t *testing.T) {
	b := memBucket(t)
	newTable(t, b, 5, 100)
	s, err := table.Open(ctx, b, nil)
	if err != nil {
		t.Fatal(err)
	}
	if s.Version() != 6 || len(s.Manifest().Fragments) != 5 || s.Manifest().Rows() != 500 {
		t.Fatalf("v%d, %d fragments, %d rows", s.Version(), len(s.Manifest().Fragments), s.Manifest().Rows())
	}
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	d := rollouts.NewDigest()
	n := 0
	for rec, err := range s.Scan(ctx, table.ScanOptions{Allocator: mem, Parallelism: 3}) {
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rollouts.RowsOf(rec) {
			if want := rollouts.Generate(42, 0, int64(n)); r.ID != want.ID || r.Prompt != want.Prompt || string(r.Artifact) != string(want.Artifact) || r.TS != want.TS {
				t.Fatalf("row %d differs from the generator", n)
			}
			d.Add(r)
			n++
		}
	}
	if n != 500 {
		t.Fatalf("scanned %d rows, want 500", n)
	}
}

func TestProjectionAndPredicates(t *testing.T) {
	b := memBucket(t)
	newTable(t, b, 4, 50) // ids 0..199, fragment k holds 50k..50k+49
	s, err := table.Open(ctx, b, nil)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		pred expr.Predicate
		want func(id int64) bool
	}{
		{"equality", expr.Eq("id", value.Int(77)), func(id int64) bool { return id == 77 }},
		{"range across fragments", expr.And(expr.Ge("id", value.Int(40)), expr.Lt("id", value.Int(60))), func(id int64) bool { return id >= 40 && id < 60 }},
		{"not equal", expr.Ne("step", value.Int(3)), func(id int64) bool { return id != 3 }},
		{"in set", expr.In("id", value.Int(1), value.Int(199), value.Int(500)), func(id int64) bool { return id == 1 || id == 199 }},
		{"less or equal", expr.Le("id", value.Int(0)), func(id int64) bool { return id == 0 }},
		{"greater", expr.Gt("id", value.Int(150)), func(id int64) bool { return id > 150 }},
		{"string column", expr.Eq("worker", value.String("w00")), func(int64) bool { return true }},
		{"float column with an int literal", expr.Ge("reward", value.Int(2)), func(int64) bool { return false }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := scanIDs(t, s, table.ScanOptions{Columns: []string{"id"}, Filter: c.pred})
			var want []int64
			for id := range int64(200) {
				if c.want(id) {
					want = append(want, id)
				}
			}
			if !slices.Equal(got, want) {
				t.Fatalf("%v: got %d ids %v…, want %d", c.pred, len(got), got[:min(5, len(got))], len(want))
			}
			cnt, err := s.Count(ctx, c.pred)
			if err != nil || cnt.Rows != int64(len(want)) {
				t.Fatalf("Count(%v) = %+v, %v; want %d", c.pred, cnt, err, len(want))
			}
		})
	}
}

func TestProjectionReturnsOnlyAskedColumns(t *testing.T) {
	b := memBucket(t)
	newTable(t, b, 2, 10)
	s, err := table.Open(ctx, b, nil)
	if err != nil {
		t.Fatal(err)
	}
	for rec, err := range s.Scan(ctx, table.ScanOptions{Columns: []string{"reward", "id"}, Filter: expr.Eq("worker", value.String("w00"))}) {
		if err != nil {
			t.Fatal(err)
		}
		if rec.NumCols() != 2 || rec.Schema().Field(0).Name != "reward" || rec.Schema().Field(1).Name != "id" {
			t.Fatalf("schema %v", rec.Schema())
		}
	}
}

func TestCountUsesStatisticsWhenTheyDecide(t *testing.T) {
	b := memBucket(t)
	newTable(t, b, 4, 50)
	s, err := table.Open(ctx, b, nil)
	if err != nil {
		t.Fatal(err)
	}
	before, _ := blob.StatsOf(b)
	res, err := s.Count(ctx, expr.Ge("id", value.Int(100)))
	if err != nil || res.Rows != 100 || res.FragmentsScanned != 0 {
		t.Fatalf("Count = %+v, %v; want 100 rows from statistics alone", res, err)
	}
	after, _ := blob.StatsOf(b)
	if d := after.Sub(before); d.Requests() != 0 {
		t.Fatalf("a count decided by statistics made %d requests", d.Requests())
	}
	res, _ = s.Count(ctx, expr.Ge("reward", value.Float(0.9)))
	if res.FragmentsScanned == 0 {
		t.Fatal("reward >= 0.9 cannot be decided by statistics, yet nothing was scanned")
	}
}

func TestBadPredicatesAreTypedErrors(t *testing.T) {
	b := memBucket(t)
	newTable(t, b, 1, 10)
	s, err := table.Open(ctx, b, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []expr.Predicate{expr.Eq("nope", value.Int(1)), expr.Eq("id", value.String("x")), expr.Eq("artifact", value.Float(1))} {
		if _, err := s.Count(ctx, p); !errors.Is(err, expr.ErrBadPredicate) {
			t.Errorf("Count(%v) = %v, want ErrBadPredicate", p, err)
		}
	}
}

func TestDeleteByPredicateHidesRowsFromScansAndCounts(t *testing.T) {
	b := memBucket(t)
	tb := newTable(t, b, 3, 100)
	_, n, err := tb.Delete(ctx, expr.And(expr.Ge("id", value.Int(90)), expr.Lt("id", value.Int(110))))
	if err != nil || n != 20 {
		t.Fatalf("Delete = %d, %v; want 20", n, err)
	}
	_, n, err = tb.Delete(ctx, expr.Eq("id", value.Int(5)))
	if err != nil || n != 1 {
		t.Fatalf("second Delete = %d, %v", n, err)
	}
	s, err := table.Open(ctx, b, nil)
	if err != nil {
		t.Fatal(err)
	}
	ids := scanIDs(t, s, table.ScanOptions{})
	if len(ids) != 279 || slices.Contains(ids, 5) || slices.Contains(ids, 95) || slices.Contains(ids, 109) || !slices.Contains(ids, 110) {
		t.Fatalf("after deletes: %d rows", len(ids))
	}
	if c, _ := s.Count(ctx, nil); c.Rows != 279 {
		t.Fatalf("Count = %d, want 279", c.Rows)
	}
	if c, _ := s.Count(ctx, expr.Lt("id", value.Int(100))); c.Rows != 89 {
		t.Fatalf("Count(id < 100) = %d, want 89", c.Rows)
	}
	// The version before the deletes still has every row.
	old, err := table.Open(ctx, b, &table.OpenOptions{Version: 4})
	if err != nil {
		t.Fatal(err)
	}
	if got := len(scanIDs(t, old, table.ScanOptions{})); got != 300 {
		t.Fatalf("version 4 scans %d rows, want 300", got)
	}
}

func TestAppendOfAnotherSchemaIsRefusedBeforeWriting(t *testing.T) {
	b := memBucket(t)
	tb := newTable(t, b, 1, 10)
	// A column the table lacks, and a table column missing: refused,
	// naming the column.
	other := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int32}}, nil)
	bld := array.NewRecordBuilder(testenv.Arrow, other)
	bld.Field(0).(*array.Int32Builder).Append(1)
	rec := bld.NewRecordBatch()
	defer rec.Release()
	before, _ := blob.StatsOf(b)
	_, err := tb.Append(ctx, rec)
	var ie *evolve.InputError
	if !errors.Is(err, evolve.ErrSchemaMismatch) || !errors.As(err, &ie) || ie.Column != "worker" {
		t.Fatalf("Append of another schema: %v", err)
	}
	after, _ := blob.StatsOf(b)
	if d := after.Sub(before); d.Puts+d.CondPutsWon != 0 {
		t.Fatalf("a refused append wrote %d objects", d.Puts+d.CondPutsWon)
	}
}

func TestOpeningNothingIsNotFound(t *testing.T) {
	_, err := table.Open(ctx, memBucket(t), nil)
	if !errors.Is(err, format.ErrNotFound) {
		t.Fatalf("got %v, want ErrNotFound", err)
	}
	b := memBucket(t)
	newTable(t, b, 1, 1)
	if _, err := table.Open(ctx, b, &table.OpenOptions{Version: 99}); !errors.Is(err, format.ErrVersionNotFound) {
		t.Fatalf("version 99: %v", err)
	}
	if _, err := commit.Create(ctx, b, rollouts.Schema, nil, nil); !errors.Is(err, format.ErrExists) {
		t.Fatalf("second Create: %v", err)
	}
}

func TestTagsNameVersionsAndNeverMove(t *testing.T) {
	b := memBucket(t)
	newTable(t, b, 3, 10)
	if err := table.CreateTag(ctx, b, "before-compaction", 2); err != nil {
		t.Fatal(err)
	}
	if err := table.CreateTag(ctx, b, "before-compaction", 3); !errors.Is(err, format.ErrTagExists) {
		t.Fatalf("moving a tag: %v", err)
	}
	s, err := table.Open(ctx, b, &table.OpenOptions{Tag: "before-compaction"})
	if err != nil || s.Version() != 2 || s.Manifest().Rows() != 10 {
		t.Fatalf("open by tag: %v", err)
	}
	if _, err := table.Open(ctx, b, &table.OpenOptions{Tag: "nope"}); !errors.Is(err, format.ErrTagNotFound) {
		t.Fatalf("missing tag: %v", err)
	}
	if err := table.CreateTag(ctx, b, "../x", 2); err == nil {
		t.Fatal("a tag name with a slash was accepted")
	}
	tags, err := table.Tags(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	if len(tags) != 1 || tags[0].Name != "before-compaction" {
		t.Fatalf("Tags = %+v", tags)
	}
}

func TestVersionsListNewestFirst(t *testing.T) {
	b := memBucket(t)
	newTable(t, b, 3, 10)
	vs, err := table.Versions(ctx, b, 0, true)
	if err != nil {
		t.Fatal(err)
	}
	if len(vs) != 4 || vs[0].Version != 4 || vs[3].Version != 1 || vs[0].Kind != format.KindAppend || vs[3].Kind != format.KindCreate || vs[0].Rows != 30 {
		t.Fatalf("Versions = %+v", vs)
	}
}

func TestManifestKeysSortNewestFirst(t *testing.T) {
	vs := []uint64{1, 2, 9, 10, 11, 99, 100, 12345, math.MaxUint64 - 1}
	var keys []string
	for _, v := range vs {
		k := format.ManifestKey(v)
		if got, ok := format.ParseManifestKey(k); !ok || got != v {
			t.Fatalf("ParseManifestKey(%q) = %d, %v", k, got, ok)
		}
		keys = append(keys, k)
	}
	sorted := slices.Clone(keys)
	slices.Sort(sorted)
	slices.Reverse(sorted)
	if !slices.Equal(keys, sorted) {
		t.Fatal("manifest keys do not sort newest first")
	}
}
