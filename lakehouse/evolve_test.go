package lakehouse_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/commit"
	"github.com/stratadb/strata/harness/testenv"
	"github.com/stratadb/strata/lakehouse"
	"github.com/stratadb/strata/lakehouse/layout"
	"github.com/stratadb/strata/table"
	"github.com/stratadb/strata/table/evolve"
)

// A table whose schema was changed every way — a column added, one
// renamed and widened, one dropped and added again — exported before and
// after: iceberg-go reads every version as Strata does, fragments of every
// schema alike, the renamed column under its new name.
func TestIcebergReadsAnEvolvedSchemaOverOldAndNewFragments(t *testing.T) {
	for name, mk := range stores(t) {
		t.Run(name, func(t *testing.T) {
			st := mk(t)
			b, err := blob.Open(ctx, st.url)
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			loc, err := layout.LocationOf(st.url)
			if err != nil {
				t.Fatal(err)
			}
			schema := arrow.NewSchema([]arrow.Field{
				{Name: "id", Type: arrow.PrimitiveTypes.Int32},
				{Name: "reward", Type: arrow.PrimitiveTypes.Float32},
				{Name: "note", Type: arrow.BinaryTypes.String, Nullable: true},
			}, nil)
			if _, err := commit.Create(ctx, b, schema, nil, nil); err != nil {
				t.Fatal(err)
			}
			tb, err := commit.OpenTable(ctx, b, nil)
			if err != nil {
				t.Fatal(err)
			}
			add := func(rows string) {
				t.Helper()
				rec, _, err := array.RecordFromJSON(testenv.Arrow, tb.Current().Manifest().Schema(), strings.NewReader(rows))
				if err != nil {
					t.Fatal(err)
				}
				defer rec.Release()
				if _, err := tb.Append(ctx, rec); err != nil {
					t.Fatal(err)
				}
			}
			alter := func(cs ...evolve.ColumnChange) {
				t.Helper()
				if _, err := tb.Alter(ctx, cs...); err != nil {
					t.Fatal(err)
				}
			}
			add(`[{"id": 1, "reward": 0.5, "note": "a"}]`) // v2
			if _, err := lakehouse.Export(ctx, b, &lakehouse.Options{Location: loc}, time.Now()); err != nil {
				t.Fatal(err)
			}
			alter(evolve.ColumnChange{Op: evolve.AddColumn, Column: "grade", Type: arrow.BinaryTypes.String})
			add(`[{"id": 2, "reward": 1.5, "note": "b", "grade": "A"}]`)
			alter(evolve.ColumnChange{Op: evolve.RenameColumn, Column: "reward", To: "score"},
				evolve.ColumnChange{Op: evolve.WidenColumn, Column: "score", Type: arrow.PrimitiveTypes.Float64},
				evolve.ColumnChange{Op: evolve.WidenColumn, Column: "id", Type: arrow.PrimitiveTypes.Int64})
			add(`[{"id": 3, "score": 2.5, "note": "c", "grade": "B"}]`)
			alter(evolve.ColumnChange{Op: evolve.DropColumn, Column: "note"})
			alter(evolve.ColumnChange{Op: evolve.AddColumn, Column: "note", Type: arrow.BinaryTypes.String})
			add(`[{"id": 4, "score": 3.5, "note": "d"}]`)
			res, err := lakehouse.Export(ctx, b, &lakehouse.Options{Location: loc}, time.Now())
			if err != nil {
				t.Fatal(err)
			}
			latest, _ := table.LatestVersion(ctx, b)
			for v := uint64(2); v <= latest; v++ {
				want, got := strataRows(t, b, v), icebergRows(t, st, res.MetadataLocation, int64(v))
				if !slices.Equal(want, got) {
					t.Errorf("version %d: Strata reads %q, iceberg-go %q", v, want, got)
				}
			}
			want := []string{
				"id=1|score=0.5|grade=(null)|note=(null)|", "id=2|score=1.5|grade=A|note=(null)|",
				"id=3|score=2.5|grade=B|note=(null)|", "id=4|score=3.5|grade=(null)|note=d|"}
			if got := icebergRows(t, st, res.MetadataLocation, 0); !slices.Equal(got, want) {
				t.Errorf("iceberg-go reads the latest as %q, want %q", got, want)
			}
			// An export that adds no version (a tag only) keeps the
			// view's name mapping.
			if err := table.CreateTag(ctx, b, "evolved", latest); err != nil {
				t.Fatal(err)
			}
			again, err := lakehouse.Export(ctx, b, &lakehouse.Options{Location: loc}, time.Now())
			if err != nil || !again.Written {
				t.Fatalf("export of a tag: %+v, %v", again, err)
			}
			if got := icebergRows(t, st, again.MetadataLocation, 0); !slices.Equal(got, want) {
				t.Errorf("after a tag, iceberg-go reads %q, want %q", got, want)
			}
		})
	}
}
