package table_test

import (
	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/commit"
	"github.com/stratadb/strata/harness/rollouts"
	"github.com/stratadb/strata/harness/testenv"
	"github.com/stratadb/strata/table"
	"github.com/stratadb/strata/table/expr"
	"github.com/stratadb/strata/table/fragment"
	"github.com/stratadb/strata/table/value"
)

// A large fragment read whole (a scan of every row and column) costs five
// ranged reads at once — its tail and four parts of its body — however
// many column chunks it holds; read in part,
// one request for its footer (the object's tail; once per snapshot) and
// one per column chunk the scan reads, each fetched once, ahead of the
// decoding; a scan left early stops fetching.
func TestVolumeARemoteFragmentIsReadWithOneRequestPerChunk(t *testing.T) {
	b, err := blob.Open(ctx, "mem://")
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
	rec := rollouts.Batch(testenv.Allocator(t), 42, 0, 0, fragment.RowGroupRows+3000) // two row groups
	defer rec.Release()
	if _, err := tb.Append(ctx, rec); err != nil {
		t.Fatal(err)
	}
	s, err := table.Open(ctx, b, nil)
	if err != nil {
		t.Fatal(err)
	}
	if f := s.Manifest().Fragments[0]; f.Bytes <= 4<<20 {
		t.Fatalf("the fragment is %d bytes: too small to be read by ranges", f.Bytes)
	}
	scan := func(opts table.ScanOptions, stopAfter int) (rows int64, ranged int64) {
		before, _ := blob.StatsOf(b)
		n := 0
		next := int64(0)
		for rec, err := range s.Scan(ctx, opts) {
			if err != nil {
				t.Fatal(err)
			}
			// Row groups decoded at once are handed on in order.
			if ids, ok := rec.Column(0).(*array.Int64); ok && opts.Columns == nil {
				for i := range ids.Len() {
					if ids.Value(i) != next {
						t.Fatalf("row %d has id %d", next, ids.Value(i))
					}
					next++
				}
			}
			rows += rec.NumRows()
			if n++; n == stopAfter {
				break
			}
		}
		after, _ := blob.StatsOf(b)
		return rows, after.Sub(before).RangeGets
	}
	cols := int64(len(rollouts.Schema.Fields()))
	if rows, ranged := scan(table.ScanOptions{}, 0); rows != fragment.RowGroupRows+3000 || ranged != 1+4 {
		t.Fatalf("full scan: %d rows in %d ranged reads, want %d in 5", rows, ranged, fragment.RowGroupRows+3000)
	}
	half := expr.Lt("id", value.Int(fragment.RowGroupRows))
	if rows, ranged := scan(table.ScanOptions{Filter: half}, 0); rows != fragment.RowGroupRows || ranged != 1+cols {
		t.Fatalf("filtered scan: %d rows in %d ranged reads, want %d in %d", rows, ranged, fragment.RowGroupRows, 1+cols)
	}
	// The footer the filtered scan read is kept: one request per chunk.
	if rows, ranged := scan(table.ScanOptions{Columns: []string{"id"}}, 0); rows != fragment.RowGroupRows+3000 || ranged != 2 {
		t.Fatalf("one column: %d rows in %d ranged reads, want 2", rows, ranged)
	}
	if _, ranged := scan(table.ScanOptions{Columns: []string{"id", "prompt", "artifact"}, BatchSize: 1000}, 1); ranged > 1+2*3 {
		t.Fatalf("a scan left after one batch made %d ranged reads", ranged)
	}
}
