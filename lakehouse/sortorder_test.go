package lakehouse_test

import (
	"slices"
	"testing"
	"time"

	itable "github.com/apache/iceberg-go/table"

	iceio "github.com/apache/iceberg-go/io"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/commit"
	"github.com/stratadb/strata/compactor"
	"github.com/stratadb/strata/harness/rollouts"
	"github.com/stratadb/strata/harness/testenv"
	"github.com/stratadb/strata/lakehouse"
	"github.com/stratadb/strata/lakehouse/layout"
	"github.com/stratadb/strata/table"
	"github.com/stratadb/strata/table/evolve"
)

// The view declares the table's cluster key as its sort order, as
// iceberg-go reads it back: the key's columns by field id, ascending,
// nulls last; the same field after a rename; unsorted once the key is
// cleared. Engines read a sorted compaction's rows as Strata does.
func TestIcebergSortOrderIsTheClusterKey(t *testing.T) {
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
			if _, err := commit.Create(ctx, b, rollouts.Schema, nil, nil); err != nil {
				t.Fatal(err)
			}
			tb, err := commit.OpenTable(ctx, b, nil)
			if err != nil {
				t.Fatal(err)
			}
			for i := range 4 {
				rec := rollouts.Batch(testenv.Allocator(t), 42, 0, int64(i*50), 50)
				_, err := tb.Append(ctx, rec)
				rec.Release()
				if err != nil {
					t.Fatal(err)
				}
			}
			alter := func(c evolve.ColumnChange) {
				t.Helper()
				if _, err := tb.Alter(ctx, c); err != nil {
					t.Fatal(err)
				}
			}
			// order exports the table and reads the view's sort order back
			// as (column name, direction, null order) lines.
			order := func() ([]string, string) {
				t.Helper()
				res, err := lakehouse.Export(ctx, b, &lakehouse.Options{Location: loc}, time.Now())
				if err != nil {
					t.Fatal(err)
				}
				tbl, err := itable.NewFromLocation(ctx, itable.Identifier{"strata", "t"}, res.MetadataLocation, iceio.LoadFSFunc(st.props, res.MetadataLocation), nil)
				if err != nil {
					t.Fatal(err)
				}
				var out []string
				for _, f := range tbl.SortOrder().Fields() {
					col, ok := tbl.Schema().FindColumnName(f.SourceID())
					if !ok {
						t.Fatalf("the sort order names field %d, not in the schema", f.SourceID())
					}
					out = append(out, col+" "+f.Transform.String()+" "+string(f.Direction)+" "+string(f.NullOrder))
				}
				return out, res.MetadataLocation
			}
			if got, _ := order(); len(got) != 0 {
				t.Fatalf("a table without a cluster key: sort order %q, want unsorted", got)
			}
			alter(evolve.ColumnChange{Op: evolve.ClusterBy, Columns: []string{"worker", "reward"}})
			if _, err := compactor.Compact(ctx, b, &compactor.Policy{}, nil); err != nil {
				t.Fatal(err)
			}
			want := []string{"worker identity asc nulls-last", "reward identity asc nulls-last"}
			got, meta := order()
			if !slices.Equal(got, want) {
				t.Fatalf("sort order %q, want %q", got, want)
			}
			latest, err := table.LatestVersion(ctx, b)
			if err != nil {
				t.Fatal(err)
			}
			if s, i := strataRows(t, b, latest), icebergRows(t, st, meta, 0); !slices.Equal(s, i) {
				t.Fatalf("after a sorting compaction iceberg-go reads %d rows unlike Strata's %d", len(i), len(s))
			}
			alter(evolve.ColumnChange{Op: evolve.RenameColumn, Column: "reward", To: "score"})
			if got, _ := order(); !slices.Equal(got, []string{"worker identity asc nulls-last", "score identity asc nulls-last"}) {
				t.Fatalf("after a rename, sort order %q", got)
			}
			alter(evolve.ColumnChange{Op: evolve.ClusterBy})
			if got, _ := order(); len(got) != 0 {
				t.Fatalf("after the key is cleared, sort order %q, want unsorted", got)
			}
		})
	}
}
