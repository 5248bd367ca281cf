package commit_test

import (
	"slices"
	"testing"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/commit"
	"github.com/stratadb/strata/table"
	"github.com/stratadb/strata/table/expr"
	"github.com/stratadb/strata/table/format"
	"github.com/stratadb/strata/table/fragment"
)

// A Rewrite planned before a Delete landed on one of its source fragments
// must not commit over it: its output still holds the rows the Delete
// removed, and committing it would bring them back. It is refused as a
// retryable conflict (the compactor plans again), and the deleted rows
// stay deleted.
func TestARewriteOverAFragmentADeleteChangedIsRefused(t *testing.T) {
	b, err := blob.Open(ctx, "mem://")
	if err != nil {
		t.Fatal(err)
	}
	createIDTable(t, b)
	tb, err := commit.OpenTable(ctx, b, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, ids := range [][]int64{{1, 2, 3}, {4, 5, 6}} {
		rec := idBatch(ids...)
		if _, err := tb.Append(ctx, rec); err != nil {
			t.Fatal(err)
		}
		rec.Release()
	}
	planned, err := table.ReadLatest(ctx, b) // what a compactor planned against
	if err != nil {
		t.Fatal(err)
	}
	var removed []uint64
	for _, f := range planned.Fragments {
		removed = append(removed, f.ID)
	}
	rec := idBatch(1, 2, 3, 4, 5, 6)
	out, err := fragment.Write(ctx, b, idSchema, rec)
	rec.Release()
	if err != nil {
		t.Fatal(err)
	}
	// Meanwhile a Delete lands on the first fragment.
	pred, _ := expr.ParseFilter("id = 2")
	if _, n, err := tb.Delete(ctx, pred); err != nil || n != 1 {
		t.Fatalf("delete: %d, %v", n, err)
	}
	txn := format.Transaction{Kind: format.KindRewrite, Removed: removed, Added: []format.Fragment{out}}
	_, err = commit.Commit(ctx, b, planned, txn, &commit.Options{CatchUp: true})
	if !commit.IsRetryableConflict(err) {
		t.Fatalf("the Rewrite over a deleted row: %v, want a retryable conflict", err)
	}
	if got := latestIDs(t, b); !slices.Equal(got, []int64{1, 3, 4, 5, 6}) {
		t.Fatalf("the table holds %v", got)
	}
}
