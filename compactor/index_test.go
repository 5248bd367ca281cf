package compactor_test

import (
	"testing"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/commit"
	"github.com/stratadb/strata/compactor"
	"github.com/stratadb/strata/harness/rollouts"
	"github.com/stratadb/strata/table"
	"github.com/stratadb/strata/table/expr"
	"github.com/stratadb/strata/table/value"
)

func take(t *testing.T, b blob.Bucket, keys ...int64) (map[int64]rollouts.Row, table.TakeResult) {
	t.Helper()
	s, err := table.Open(ctx, b, nil)
	if err != nil {
		t.Fatal(err)
	}
	recs, res, err := s.Take(ctx, "id", value.Ints(keys...), nil)
	if err != nil {
		t.Fatalf("Take: %v", err)
	}
	out := map[int64]rollouts.Row{}
	for _, rec := range recs {
		for _, r := range rollouts.RowsOf(rec) {
			if _, dup := out[r.ID]; dup {
				t.Fatalf("Take returned id %d twice", r.ID)
			}
			out[r.ID] = r
		}
		rec.Release()
	}
	return out, res
}

func checkRows(t *testing.T, got map[int64]rollouts.Row, want ...int64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("Take returned %d rows, want %d", len(got), len(want))
	}
	for _, id := range want {
		r, ok := got[id]
		exp := rollouts.Generate(42, 0, id)
		if !ok || r.Prompt != exp.Prompt || string(r.Artifact) != string(exp.Artifact) || r.Reward != exp.Reward {
			t.Fatalf("row %d missing or different", id)
		}
	}
}

// After compaction, Take by key still finds every row through the
// fragment-reuse map, and the compaction commit did not rewrite the index;
// rows appended after the index are found by a pruned scan.
func TestTakeFindsRowsThroughCompactionsWithoutRewritingTheIndex(t *testing.T) {
	b := rolloutsTable(t, "mem://", 0, 12, 25) // ids 0..299
	tb, err := commit.OpenTable(ctx, b, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, n, err := tb.Delete(ctx, expr.In("id", value.Int(30), value.Int(31), value.Int(260))); err != nil || n != 3 {
		t.Fatalf("delete: %d %v", n, err)
	}
	if _, err := tb.CreateIndex(ctx, "id"); err != nil {
		t.Fatal(err)
	}
	before, err := table.ReadLatest(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	indexKey := before.Indexes[0].Key
	keys := []int64{0, 29, 32, 150, 299, 30, 260, 5000}
	got, res := take(t, b, keys...)
	checkRows(t, got, 0, 29, 32, 150, 299)
	if res.FromIndex != 5 || res.ScannedFrags != 0 {
		t.Fatalf("before compaction: %+v", res)
	}

	// Rows appended after the index: found by a pruned scan.
	appendRollouts(t, b, 0, 12, 2, 25) // ids 300..349
	// Two compactions, so lookups translate through a chain of entries.
	if _, err := compactor.Compact(ctx, b, &compactor.Policy{TargetRows: 150}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := compactor.Compact(ctx, b, &compactor.Policy{}, nil); err != nil {
		t.Fatal(err)
	}
	after, err := table.ReadLatest(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	if len(after.Indexes) != 1 || after.Indexes[0].Key != indexKey {
		t.Fatalf("the compactions rewrote the index: %+v", after.Indexes)
	}
	if len(after.Remap) == 0 || len(after.Fragments) >= len(before.Fragments) {
		t.Fatalf("after compaction: %d fragments, %d remap entries", len(after.Fragments), len(after.Remap))
	}
	got, res = take(t, b, append(keys, 310, 349)...)
	checkRows(t, got, 0, 29, 32, 150, 299, 310, 349)
	if res.FromIndex != 5 {
		t.Fatalf("after compaction: %+v (index lookups should still resolve)", res)
	}
	// A later rebuild folds the entries in.
	if _, err := tb.CreateIndex(ctx, "id"); err != nil {
		t.Fatal(err)
	}
	rebuilt, err := table.ReadLatest(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	if len(rebuilt.Remap) != 0 || rebuilt.Indexes[0].Key == indexKey {
		t.Fatalf("rebuild: remap %d entries, index %s", len(rebuilt.Remap), rebuilt.Indexes[0].Key)
	}
	got, res = take(t, b, 0, 349, 31)
	checkRows(t, got, 0, 349)
	if res.FromIndex != 2 || res.ScannedFrags != 0 {
		t.Fatalf("after rebuild: %+v", res)
	}
}

func TestVolumeTakeReadsOnlyTheRowGroupsItNeeds(t *testing.T) {
	b := rolloutsTable(t, "mem://", 0, 100, 400) // 40,000 rows
	if _, err := compactor.Compact(ctx, b, &compactor.Policy{}, nil); err != nil {
		t.Fatal(err)
	}
	tb, err := commit.OpenTable(ctx, b, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tb.CreateIndex(ctx, "id"); err != nil {
		t.Fatal(err)
	}
	s, err := table.Open(ctx, b, nil)
	if err != nil {
		t.Fatal(err)
	}
	f := s.Manifest().Fragments[0]
	before, _ := blob.StatsOf(b)
	recs, _, err := s.Take(ctx, "id", value.Ints(12345), nil)
	if err != nil {
		t.Fatal(err)
	}
	after, _ := blob.StatsOf(b)
	var rows []arrow.RecordBatch
	rows = append(rows, recs...)
	if len(rows) != 1 || rows[0].NumRows() != 1 {
		t.Fatalf("got %d batches", len(rows))
	}
	read := after.Sub(before).BytesIn
	if read > f.Bytes/2 {
		t.Fatalf("Take of one row read %d of the fragment's %d bytes", read, f.Bytes)
	}
	t.Logf("one row by key: %d ranged reads, %d of %d bytes", after.Sub(before).RangeGets, read, f.Bytes)
	for _, r := range rows {
		r.Release()
	}
}
