package compactor_test

import (
	"strconv"
	"testing"

	"github.com/stratadb/strata/commit"
	"github.com/stratadb/strata/compactor"
	"github.com/stratadb/strata/table"
)

// A fragment of more than one row group, the last one partial, keeps every
// row through write, scan, take, delete and compaction: a writer that
// dropped the partial last group, or a reader that skipped it, loses rows
// near the end.
func TestFragmentsOfSeveralRowGroupsWithAPartialLastOne(t *testing.T) {
	const n = table.RowGroupRows + 1000
	b := rolloutsTable(t, "mem://", 0, 1, n) // one fragment: a full group and 1,000 rows
	appendRollouts(t, b, 1, 0, 1, 10)
	before := digest(t, b)
	if len(before) != n+10 {
		t.Fatalf("%d rows scanned, %d written", len(before), n+10)
	}
	last := int64(n - 1)
	got, _ := take(t, b, 0, table.RowGroupRows-1, table.RowGroupRows, last)
	checkRows(t, got, 0, table.RowGroupRows-1, table.RowGroupRows, last)

	// Delete the last 500 rows, all in the partial group.
	tb, err := commit.OpenTable(ctx, b, nil)
	if err != nil {
		t.Fatal(err)
	}
	pred, err := table.ParseFilter("id >= " + strconv.Itoa(n-500) + " AND id < " + strconv.Itoa(n))
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
	got, _ = take(t, b, table.RowGroupRows, int64(n-501), last)
	checkRows(t, got, table.RowGroupRows, int64(n-501))
}
