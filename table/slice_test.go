package table_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/stratadb/strata/table"
	"github.com/stratadb/strata/table/expr"
	"github.com/stratadb/strata/table/value"
)

// The slices of a version's fragments read, together, every row a scan
// reads, each once and in the same order, whatever the slices' size and
// wherever deletions and a filter fall; a slice of a fragment the version
// does not hold, or not a range, is an error.
func TestSlicesOfFragmentsReadEveryRowOnce(t *testing.T) {
	b := memBucket(t)
	tb := newTable(t, b, 2, 20_000) // row groups of 16,384 rows and a short one
	// Deletions before a slice's start and inside it, in one batch.
	for _, p := range []expr.Predicate{expr.Lt("id", value.Int(3)), expr.And(expr.Ge("id", value.Int(16_380)), expr.Lt("id", value.Int(16_390))),
		expr.In("id", value.Int(6_990), value.Int(7_005), value.Int(7_500), value.Int(20_001))} {
		if _, _, err := tb.Delete(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	s, err := table.Open(ctx, b, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, filter := range []expr.Predicate{nil, expr.Ne("step", value.Int(3))} {
		want := scanIDs(t, s, table.ScanOptions{Filter: filter})
		for _, size := range []int64{1_500, 16_384, 100_000} {
			var got []int64
			for _, f := range s.Manifest().Fragments {
				for lo := int64(0); lo < f.Rows; lo += size {
					got = append(got, scanIDs(t, s, table.ScanOptions{Filter: filter, Slice: &table.Slice{Fragment: f.ID, Lo: lo, Hi: lo + size}})...)
				}
			}
			if !slices.Equal(got, want) {
				t.Fatalf("filter %v, slices of %d rows: %d rows read, want the scan's %d", filter, size, len(got), len(want))
			}
		}
	}
	if n := len(scanIDs(t, s, table.ScanOptions{Slice: &table.Slice{Fragment: s.Manifest().Fragments[0].ID, Lo: 5, Hi: 5}})); n != 0 {
		t.Fatalf("an empty slice read %d rows", n)
	}
	for _, sl := range []table.Slice{{Fragment: 999, Lo: 0, Hi: 10}, {Fragment: s.Manifest().Fragments[0].ID, Lo: 10, Hi: 5}, {Lo: -1, Hi: 5}} {
		var err error
		for _, e := range s.Scan(ctx, table.ScanOptions{Slice: &sl}) {
			if e != nil {
				err = e
			}
		}
		if err == nil || !strings.Contains(err.Error(), "fragment") {
			t.Errorf("slice %+v: %v; want an error naming the fragment", sl, err)
		}
	}
}
