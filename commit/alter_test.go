package commit_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/commit"
	"github.com/stratadb/strata/compactor"
	"github.com/stratadb/strata/harness/testenv"
	"github.com/stratadb/strata/table"
	"github.com/stratadb/strata/table/changes"
	"github.com/stratadb/strata/table/evolve"
	"github.com/stratadb/strata/table/expr"
	"github.com/stratadb/strata/table/value"
	"github.com/stratadb/strata/walshard"
)

var evSchema = arrow.NewSchema([]arrow.Field{
	{Name: "id", Type: arrow.PrimitiveTypes.Int32},
	{Name: "reward", Type: arrow.PrimitiveTypes.Float32},
	{Name: "note", Type: arrow.BinaryTypes.String, Nullable: true},
}, nil)

// jsonBatch builds a batch of schema from JSON rows.
func jsonBatch(t testing.TB, schema *arrow.Schema, rows string) arrow.RecordBatch {
	t.Helper()
	rec, _, err := array.RecordFromJSON(testenv.Arrow, schema, strings.NewReader(rows))
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

// rowsOf scans version v (0: the latest; with filter when not nil) as
// sorted lines "col=value ...", and returns the scan's schema too.
func rowsOf(t testing.TB, b blob.Bucket, v uint64, filter expr.Predicate) ([]string, *arrow.Schema) {
	t.Helper()
	s, err := table.Open(ctx, b, &table.OpenOptions{Version: v})
	if err != nil {
		t.Fatal(err)
	}
	sc, err := s.ScanSchema(table.ScanOptions{Filter: filter})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for rec, err := range s.Scan(ctx, table.ScanOptions{Filter: filter}) {
		if err != nil {
			t.Fatal(err)
		}
		for r := range int(rec.NumRows()) {
			var cells []string
			for c := range int(rec.NumCols()) {
				cells = append(cells, rec.Schema().Field(c).Name+"="+rec.Column(c).ValueStr(r))
			}
			out = append(out, strings.Join(cells, " "))
		}
	}
	slices.Sort(out)
	return out, sc
}

func appendJSON(t testing.TB, tb *commit.Table, schema *arrow.Schema, rows string) {
	t.Helper()
	rec := jsonBatch(t, schema, rows)
	defer rec.Release()
	if _, err := tb.Append(ctx, rec); err != nil {
		t.Fatal(err)
	}
}

func TestAlterAddRenameWidenDropReadOldFragmentsUnderTheNewSchema(t *testing.T) {
	b := open(t, "mem://")
	if _, err := commit.Create(ctx, b, evSchema, nil, nil); err != nil {
		t.Fatal(err)
	}
	tb, err := commit.OpenTable(ctx, b, nil)
	if err != nil {
		t.Fatal(err)
	}
	// old: a writer that opened the table before any change, and keeps
	// appending with the schema it holds.
	old, err := commit.OpenTable(ctx, b, nil)
	if err != nil {
		t.Fatal(err)
	}
	appendJSON(t, tb, evSchema, `[{"id": 1, "reward": 0.5, "note": "a"}, {"id": 2, "reward": 1.5, "note": "b"}]`)

	if _, err := tb.Alter(ctx, evolve.ColumnChange{Op: evolve.AddColumn, Column: "grade", Type: arrow.BinaryTypes.String}); err != nil {
		t.Fatal(err)
	}
	got, sc := rowsOf(t, b, 0, nil)
	want := []string{"id=1 reward=0.5 note=a grade=(null)", "id=2 reward=1.5 note=b grade=(null)"}
	if !slices.Equal(got, want) {
		t.Fatalf("after add: %q, want %q", got, want)
	}
	if md := sc.Metadata(); md.Len() != 0 {
		t.Errorf("a scan's schema carries the table's evolution metadata: %v", md)
	}
	tb.Refresh(ctx)
	appendJSON(t, tb, tb.Current().Manifest().Schema(), `[{"id": 3, "reward": 2.5, "note": "c", "grade": "A"}]`)

	if _, err := tb.Alter(ctx,
		evolve.ColumnChange{Op: evolve.RenameColumn, Column: "reward", To: "score"},
		evolve.ColumnChange{Op: evolve.WidenColumn, Column: "score", Type: arrow.PrimitiveTypes.Float64},
		evolve.ColumnChange{Op: evolve.WidenColumn, Column: "id", Type: arrow.PrimitiveTypes.Int64}); err != nil {
		t.Fatal(err)
	}
	// The old writer appends under the schema it opened with.
	appendJSON(t, old, evSchema, `[{"id": 4, "reward": 3.5, "note": "d"}]`)
	got, sc = rowsOf(t, b, 0, nil)
	want = []string{"id=1 score=0.5 note=a grade=(null)", "id=2 score=1.5 note=b grade=(null)",
		"id=3 score=2.5 note=c grade=A", "id=4 score=3.5 note=d grade=(null)"}
	if !slices.Equal(got, want) {
		t.Fatalf("after rename and widen: %q, want %q", got, want)
	}
	if sc.Field(0).Type.ID() != arrow.INT64 || sc.Field(1).Type.ID() != arrow.FLOAT64 {
		t.Errorf("widened columns read as %s, %s", sc.Field(0).Type, sc.Field(1).Type)
	}
	// A filter on the renamed column prunes and matches by its values.
	if got, _ := rowsOf(t, b, 0, expr.Gt("score", value.Float(2))); len(got) != 2 {
		t.Errorf("score > 2: %q, want ids 3 and 4", got)
	}
	// The version before the change still reads as it was.
	if got, _ := rowsOf(t, b, 2, nil); !slices.Equal(got, []string{"id=1 reward=0.5 note=a", "id=2 reward=1.5 note=b"}) {
		t.Errorf("version 2: %q", got)
	}

	// Dropped, then added again: the new column does not find the old
	// one's values.
	if _, err := tb.Alter(ctx, evolve.ColumnChange{Op: evolve.DropColumn, Column: "note"}); err != nil {
		t.Fatal(err)
	}
	if _, err := tb.Alter(ctx, evolve.ColumnChange{Op: evolve.AddColumn, Column: "note", Type: arrow.BinaryTypes.String}); err != nil {
		t.Fatal(err)
	}
	got, _ = rowsOf(t, b, 0, nil)
	want = []string{"id=1 score=0.5 grade=(null) note=(null)", "id=2 score=1.5 grade=(null) note=(null)",
		"id=3 score=2.5 grade=A note=(null)", "id=4 score=3.5 grade=(null) note=(null)"}
	if !slices.Equal(got, want) {
		t.Fatalf("after drop and add: %q, want %q", got, want)
	}
	// The old writer planned its append under the schema before the
	// drop: its note would be lost, so it conflicts; sent again, it lands,
	// columns matched by name (a renamed one under its first name too):
	// its note is the new note.
	rec5 := jsonBatch(t, evSchema, `[{"id": 5, "reward": 4.5, "note": "e"}]`)
	defer rec5.Release()
	var ce *commit.ConflictError
	if _, err := old.Append(ctx, rec5); !errors.As(err, &ce) {
		t.Fatalf("an append with values in a column dropped since: %v, want a conflict", err)
	}
	appendJSON(t, old, evSchema, `[{"id": 5, "reward": 4.5, "note": "e"}]`)
	if got, _ := rowsOf(t, b, 0, expr.Eq("id", value.Int(5))); !slices.Equal(got, []string{"id=5 score=4.5 grade=(null) note=e"}) {
		t.Errorf("old writer's row: %q", got)
	}
	// A column dropped and not added again is refused by name.
	if _, err := tb.Alter(ctx, evolve.ColumnChange{Op: evolve.DropColumn, Column: "grade"}); err != nil {
		t.Fatal(err)
	}
	rec := jsonBatch(t, tb.Current().Manifest().Schema(), `[{"id": 6, "score": 1}]`)
	defer rec.Release()
	stale := jsonBatch(t, arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}, {Name: "grade", Type: arrow.BinaryTypes.String}}, nil), `[{"id": 6, "grade": "B"}]`)
	defer stale.Release()
	if _, err := tb.Append(ctx, stale); !errors.Is(err, evolve.ErrBadInput) || !strings.Contains(err.Error(), "dropped") {
		t.Errorf("a dropped column appended: %v, want an error saying it was dropped", err)
	}

	// Compaction rewrites fragments of every schema into one of the
	// current schema; every row reads the same after.
	before, _ := rowsOf(t, b, 0, nil)
	if _, err := compactor.Compact(ctx, b, &compactor.Policy{MinFragments: 2}, nil); err != nil {
		t.Fatal(err)
	}
	after, _ := rowsOf(t, b, 0, nil)
	if !slices.Equal(before, after) || len(after) != 5 {
		t.Fatalf("compaction changed rows:\n%q\n%q", before, after)
	}
	s, err := table.Open(ctx, b, nil)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(s.Manifest().Fragments); n != 1 {
		t.Errorf("%d fragments after compaction, want 1", n)
	}
	for _, f := range s.Manifest().Fragments {
		if f.SchemaID != evolve.SchemaID(s.Manifest().Schema()) {
			t.Errorf("compacted fragment has schema %d, table %d", f.SchemaID, evolve.SchemaID(s.Manifest().Schema()))
		}
	}
}

func TestAlterRefusesWhatTheTableCannotTake(t *testing.T) {
	b := open(t, "mem://")
	if _, err := commit.Create(ctx, b, evSchema, nil, nil); err != nil {
		t.Fatal(err)
	}
	tb, err := commit.OpenTable(ctx, b, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []evolve.ColumnChange{
		{Op: evolve.AddColumn, Column: "id", Type: arrow.PrimitiveTypes.Int64},
		{Op: evolve.AddColumn, Column: "x"},
		{Op: evolve.RenameColumn, Column: "nope", To: "x"},
		{Op: evolve.RenameColumn, Column: "id", To: "note"},
		{Op: evolve.WidenColumn, Column: "reward", Type: arrow.PrimitiveTypes.Int64},
		{Op: evolve.WidenColumn, Column: "id", Type: arrow.PrimitiveTypes.Int16},
		{Op: evolve.WidenColumn, Column: "note", Type: arrow.BinaryTypes.Binary},
		{Op: "truncate", Column: "id"},
	} {
		_, err := tb.Alter(ctx, c)
		if !errors.Is(err, evolve.ErrBadSchemaChange) || !strings.Contains(err.Error(), c.Column) {
			t.Errorf("%s: %v, want a refusal naming the column", c, err)
		}
	}
	if v, _ := table.LatestVersion(ctx, b); v != 1 {
		t.Errorf("refused changes committed: latest version %d", v)
	}
	// Columns that carry Parquet field ids are read by id elsewhere: the
	// schema of such a table does not change.
	withIDs := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64, Metadata: arrow.NewMetadata([]string{"PARQUET:field_id"}, []string{"1"})}}, nil)
	_, ids := alterTable(t, withIDs)
	if _, err := ids.Alter(ctx, evolve.ColumnChange{Op: evolve.AddColumn, Column: "x", Type: arrow.PrimitiveTypes.Int64}); !errors.Is(err, evolve.ErrBadSchemaChange) || !strings.Contains(err.Error(), "field ids") {
		t.Errorf("an alter of a table with field ids: %v", err)
	}
	// Widening to nullable is a change of its own.
	if _, err := tb.Alter(ctx, evolve.ColumnChange{Op: evolve.WidenColumn, Column: "id", Nullable: true}); err != nil {
		t.Fatal(err)
	}
	s, _ := table.Open(ctx, b, nil)
	if !s.Manifest().Schema().Field(0).Nullable {
		t.Error("id is still not nullable")
	}

}

// alterTable makes a table of schema sc in memory and returns it open.
func alterTable(t *testing.T, sc *arrow.Schema) (blob.Bucket, *commit.Table) {
	t.Helper()
	b := open(t, "mem://")
	if _, err := commit.Create(ctx, b, sc, nil, nil); err != nil {
		t.Fatal(err)
	}
	// Its tests' shards are closed when the schema changes: no lease to
	// outwait.
	tb, err := commit.OpenTable(ctx, b, &commit.Options{SchemaWait: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	return b, tb
}

// A WAL entry written before a column was dropped and added again under
// its name, replayed after: the new column reads null, not the dropped
// one's values.
func TestWALRowsOfADroppedColumnDoNotReturnUnderItsName(t *testing.T) {
	sc := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}}, nil)
	b, tb := alterTable(t, sc)
	if _, err := tb.Alter(ctx, evolve.ColumnChange{Op: evolve.AddColumn, Column: "x", Type: arrow.PrimitiveTypes.Int64}); err != nil {
		t.Fatal(err)
	}
	sh, err := walshard.Open(ctx, b, &walshard.Options{Shard: "w", FlushInterval: time.Hour, MergeInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	rec := jsonBatch(t, sh.Schema(), `[{"id": 1, "x": 111}]`)
	defer rec.Release()
	if err := sh.Append(ctx, rec); err != nil {
		t.Fatal(err)
	}
	sh.Close()
	if _, err := tb.Alter(ctx, evolve.ColumnChange{Op: evolve.DropColumn, Column: "x"}, evolve.ColumnChange{Op: evolve.AddColumn, Column: "x", Type: arrow.PrimitiveTypes.Int64}); err != nil {
		t.Fatal(err)
	}
	sh, err = walshard.Open(ctx, b, &walshard.Options{Shard: "w", FlushInterval: time.Hour, MergeInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer sh.Close()
	for _, step := range []string{"replayed", "merged"} {
		if step == "merged" {
			if err := sh.Drain(ctx); err != nil {
				t.Fatal(err)
			}
		}
		var got []string
		for rec, err := range sh.ScanFresh(ctx, table.ScanOptions{}) {
			if err != nil {
				t.Fatal(err)
			}
			for r := range int(rec.NumRows()) {
				var cells []string
				for c := range int(rec.NumCols()) {
					cells = append(cells, rec.Schema().Field(c).Name+"="+rec.Column(c).ValueStr(r))
				}
				got = append(got, strings.Join(cells, " "))
			}
		}
		if want := []string{"id=1 x=(null)"}; !slices.Equal(got, want) {
			t.Errorf("%s: %q, want %q", step, got, want)
		}
	}
}

// A restore to a version before a column was added, with rows of the
// later schema in a shard's WAL: the shard opens, its rows land (their
// value in the column the restore took away left out), and a column added
// again under that name does not find them.
func TestShardRowsOfASchemaARestoreTookBackStillLand(t *testing.T) {
	sc := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}}, nil)
	b, tb := alterTable(t, sc)
	if _, err := tb.Alter(ctx, evolve.ColumnChange{Op: evolve.AddColumn, Column: "x", Type: arrow.PrimitiveTypes.Int64}); err != nil {
		t.Fatal(err)
	}
	sh, err := walshard.Open(ctx, b, &walshard.Options{Shard: "w", FlushInterval: time.Hour, MergeInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	rec := jsonBatch(t, sh.Schema(), `[{"id": 1, "x": 5}]`)
	defer rec.Release()
	if err := sh.Append(ctx, rec); err != nil {
		t.Fatal(err)
	}
	sh.Close()
	if _, err := tb.Restore(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if _, err := tb.Alter(ctx, evolve.ColumnChange{Op: evolve.AddColumn, Column: "x", Type: arrow.PrimitiveTypes.Int64}); err != nil {
		t.Fatal(err)
	}
	sh, err = walshard.Open(ctx, b, &walshard.Options{Shard: "w", FlushInterval: time.Hour, MergeInterval: time.Hour})
	if err != nil {
		t.Fatalf("the shard does not open after the restore: %v", err)
	}
	defer sh.Close()
	if err := sh.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	if got, _ := rowsOf(t, b, 0, nil); !slices.Equal(got, []string{"id=1 x=(null)"}) {
		t.Errorf("after the restore: %q", got)
	}
}

// Changes over a range with schema changes, asked for in the newest
// schema (as the server answers), come in one schema, the rows written
// before a widening widened and before an add null.
func TestChangesComeInOneSchemaAcrossAlters(t *testing.T) {
	sc := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int32}}, nil)
	b, tb := alterTable(t, sc)
	appendJSON(t, tb, sc, `[{"id": 1}, {"id": 2}]`)
	if _, err := tb.Alter(ctx, evolve.ColumnChange{Op: evolve.WidenColumn, Column: "id", Type: arrow.PrimitiveTypes.Int64},
		evolve.ColumnChange{Op: evolve.AddColumn, Column: "extra", Type: arrow.BinaryTypes.String}); err != nil {
		t.Fatal(err)
	}
	appendJSON(t, tb, tb.Current().Manifest().Schema(), `[{"id": 3, "extra": "e"}]`)
	last := tb.Current().Manifest()
	var got []string
	for c, err := range changes.Changes(ctx, b, 0, last.Version, changes.ChangesOptions{As: last.Schema(), Columns: []string{"extra", "id"}}) {
		if err != nil {
			t.Fatal(err)
		}
		if c.Rows.Column(1).DataType().ID() != arrow.INT64 {
			t.Fatalf("v%d: id is %s", c.Version, c.Rows.Column(1).DataType())
		}
		for r := range int(c.Rows.NumRows()) {
			got = append(got, fmt.Sprintf("v%d %s %s", c.Version, c.Rows.Column(0).ValueStr(r), c.Rows.Column(1).ValueStr(r)))
		}
	}
	if want := []string{"v2 (null) 1", "v2 (null) 2", "v4 e 3"}; !slices.Equal(got, want) {
		t.Errorf("changes: %q, want %q", got, want)
	}
}

// A handle that opened before another made a column nullable appends a
// null to it: it reads the new schema once, and the row lands.
func TestAStaleHandleTakesRowsTheNewSchemaAllows(t *testing.T) {
	b, tb := alterTable(t, evSchema)
	stale, err := commit.OpenTable(ctx, b, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tb.Alter(ctx, evolve.ColumnChange{Op: evolve.WidenColumn, Column: "reward", Nullable: true},
		evolve.ColumnChange{Op: evolve.AddColumn, Column: "grade", Type: arrow.BinaryTypes.String}); err != nil {
		t.Fatal(err)
	}
	nullable := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int32}, {Name: "reward", Type: arrow.PrimitiveTypes.Float32, Nullable: true}, {Name: "grade", Type: arrow.BinaryTypes.String, Nullable: true}}, nil)
	appendJSON(t, stale, nullable, `[{"id": 1, "reward": null, "grade": "A"}]`)
	rec := jsonBatch(t, nullable, `[{"id": 1, "reward": 2, "grade": "B"}]`)
	defer rec.Release()
	if _, err := stale.Upsert(ctx, []string{"id"}, rec); err != nil {
		t.Fatal(err)
	}
	if got, _ := rowsOf(t, b, 0, nil); !slices.Equal(got, []string{"id=1 reward=2 note=(null) grade=B"}) {
		t.Errorf("%q", got)
	}
}

// Take through a key index finds a row an upsert replaced (its new row is
// in a fragment the index does not cover).
func TestTakeThroughAnIndexFindsAnUpsertedRow(t *testing.T) {
	b := open(t, "mem://")
	tb := newKVTable(t, b)
	rec := kvBatch(kv{1, "a", 1}, kv{2, "a", 2})
	defer rec.Release()
	if _, err := tb.Append(ctx, rec); err != nil {
		t.Fatal(err)
	}
	if _, err := tb.CreateIndex(ctx, "id"); err != nil {
		t.Fatal(err)
	}
	upsert(t, tb, []string{"id"}, kv{1, "b", 10})
	s, _ := table.Open(ctx, b, nil)
	recs, _, err := s.TakeWith(ctx, "id", value.Ints(1, 2), table.ScanOptions{Columns: []string{"id", "reward"}})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range recs {
		for i := range int(r.NumRows()) {
			got = append(got, r.Column(0).ValueStr(i)+"="+r.Column(1).ValueStr(i))
		}
		r.Release()
	}
	slices.Sort(got)
	if want := []string{"1=10", "2=2"}; !slices.Equal(got, want) {
		t.Errorf("take: %q, want %q", got, want)
	}
}

// A stale handle's append of rows with values in a column another handle
// dropped is refused naming the column, whether its commit meets the drop
// among the versions it rebases over or (its base collected, or its rows
// sent again on a newer version) is applied over it; nothing is
// committed.
func TestAStaleHandlesAppendToADroppedColumnIsRefusedByName(t *testing.T) {
	for _, collected := range []bool{false, true} {
		t.Run(fmt.Sprintf("base collected %v", collected), func(t *testing.T) {
			b, tb := alterTable(t, evSchema)
			appendJSON(t, tb, evSchema, `[{"id": 1, "reward": 1, "note": "kept"}]`)
			stale, err := commit.OpenTable(ctx, b, nil)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := tb.Alter(ctx, evolve.ColumnChange{Op: evolve.DropColumn, Column: "note"}); err != nil {
				t.Fatal(err)
			}
			appendJSON(t, tb, arrow.NewSchema(evSchema.Fields()[:2], nil), `[{"id": 2, "reward": 2}]`)
			if collected {
				// The versions the stale handle read are gone: its commit
				// starts from the newest and checks nothing below it.
				if _, err := compactor.GC(ctx, b, &compactor.GCPolicy{KeepVersions: 1}, time.Now().Add(3*time.Hour)); err != nil {
					t.Fatal(err)
				}
			}
			before, err := table.LatestVersion(ctx, b)
			if err != nil {
				t.Fatal(err)
			}
			rec := jsonBatch(t, evSchema, `[{"id": 3, "reward": 3, "note": "lost?"}]`)
			defer rec.Release()
			_, err = stale.Append(ctx, rec)
			if !errors.Is(err, evolve.ErrBadInput) || !strings.Contains(err.Error(), `"note"`) {
				t.Fatalf("append with a dropped column through a stale handle: %v, want a refusal naming note", err)
			}
			if after, _ := table.LatestVersion(ctx, b); after != before {
				t.Fatalf("v%d committed after the refusal", after)
			}
			// Without the column, the same handle's rows go in.
			appendJSON(t, stale, arrow.NewSchema(evSchema.Fields()[:2], nil), `[{"id": 3, "reward": 3}]`)
		})
	}
}
