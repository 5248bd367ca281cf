package compactor_test

import (
	"strconv"
	"testing"

	"github.com/stratadb/strata/commit"
	"github.com/stratadb/strata/compactor"
	"github.com/stratadb/strata/table/expr"
	"github.com/stratadb/strata/table/fragment"
	"github.com/stratadb/strata/table/value"
)

// A fragment of more than one row group, the last one partial, keeps every
// row through write, scan, take, delete and compaction: a writer that
// dropped the partial last group, or a reader that skipped it, loses rows
// near the end.
func TestVolumeFragmentsOfSeveralRowGroupsWithAPartialLastOne(t *testing.T) {
	const n = fragment.RowGroupRows + 1000
	b := rolloutsTable(t, "mem://", 0, 1, n) // one fragment: a full group and 1,000 rows
	appendRollouts(t, b, 1, 0, 1, 10)
	before := digest(t, b)
	if len(before) != n+10 {
		t.Fatalf("%d rows scanned, %d written", len(before), n+10)
	}
	last := int64(n - 1)
	got, _ := take(t, b, 0, fragment.RowGroupRows-1, fragment.RowGroupRows, last)
	checkRows(t, got, 0, fragment.RowGroupRows-1, fragment.RowGroupRows, last)

	// Delete the last 500 rows, all in the partial group.
	tb, err := commit.OpenTable(ctx, b, nil)
	if err != nil {
		t.Fatal(err)
	}
	pred, err := expr.ParseFilter("id >= " + strconv.Itoa(n-500) + " AND id < " + strconv.Itoa(n))
	if err != nil {
		t.Fatal(err)
	}
	if _, deleted, err := tb.Delete(ctx, pred); err != nil || deleted != 500 {
		t.Fatalf("delete: %d rows, %v", deleted, err)
	}
	for id := int64(n - 500); id < n; id++ {
		delete(before, id)
	}
	sameRows(t, before, digest(t, b), "the delete")

	res, err := compactor.Compact(ctx, b, &compactor.Policy{MinFragments: 2}, nil)
	if err != nil || res.Version == 0 || res.FragmentsAfter != 1 {
		t.Fatalf("compaction: %+v, %v", res, err)
	}
	sameRows(t, before, digest(t, b), "compaction")
	got, _ = take(t, b, fragment.RowGroupRows, int64(n-501), last)
	checkRows(t, got, fragment.RowGroupRows, int64(n-501))
}

// A delete in a compacted fragment of a full row group and a partial one
// (issue 36): the scan of its live rows yields a batch per row group, the
// first short of RowGroupRows, so the rows gathered for one row group ran
// past it and the copy failed on every later run. The rows are cut where
// row groups end: the compaction succeeds, and the output's row groups
// are full but the last.
func TestVolumeADeleteInALargeCompactedFragmentDoesNotStopCompaction(t *testing.T) {
	b := rolloutsTable(t, "mem://", 0, 3, 7000)
	if res, err := compactor.Compact(ctx, b, &compactor.Policy{MinFragments: 2}, nil); err != nil || res.FragmentsAfter != 1 {
		t.Fatalf("first compaction: %+v, %v", res, err)
	}
	tb, err := commit.OpenTable(ctx, b, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, n, err := tb.Delete(ctx, expr.Lt("id", value.Int(100))); err != nil || n != 100 {
		t.Fatalf("delete: %d rows, %v", n, err)
	}
	appendRollouts(t, b, 2, 0, 2, 10)
	before := digest(t, b)
	for run := range 2 {
		res, err := compactor.Compact(ctx, b, &compactor.Policy{MinFragments: 2}, nil)
		if err != nil || res.FragmentsAfter != 1 || res.RowsAfter != 20920 {
			t.Fatalf("compaction %d after the delete: %+v, %v", run, res, err)
		}
	}
	sameRows(t, before, digest(t, b), "compaction")
	f := open(t, b).Manifest().Fragments[0]
	md := footer(t, b, f.Key)
	for i := range md.NumRowGroups() - 1 {
		if n := md.RowGroup(i).NumRows(); n != fragment.RowGroupRows {
			t.Fatalf("row group %d of %d holds %d rows", i, md.NumRowGroups(), n)
		}
	}
}
