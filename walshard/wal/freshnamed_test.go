package wal

import (
	"slices"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/stratadb/strata/table/fragment"
)

// cutBatches leaves out row ranges that cross an entry's batches, and
// leaves the other entries' batches whole, their keys beside them.
func TestCutBatchesLeavesOutRangesAcrossAnEntrysBatches(t *testing.T) {
	schema := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}}, nil)
	mk := func(ids ...int64) arrow.RecordBatch {
		b := array.NewInt64Builder(memory.DefaultAllocator)
		defer b.Release()
		b.AppendValues(ids, nil)
		col := b.NewArray()
		defer col.Release()
		return array.NewRecordBatch(schema, []arrow.Array{col}, int64(len(ids)))
	}
	// Entry 0: batches 0 and 1 (rows 0..5); entry 1: batch 2 (rows 0..1).
	batches := []arrow.RecordBatch{mk(0, 1, 2), mk(3, 4, 5), mk(100, 101)}
	defer fragment.ReleaseAll(batches)
	keys := [][]string{nil, nil, {"k"}}
	entries := []EntryNames{{First: 0, N: 2}, {First: 2, N: 1}}
	out, outKeys := cutBatches(batches, keys, entries, map[int][][2]int64{0: {{2, 4}, {5, 6}}})
	defer fragment.ReleaseAll(out)
	var got []int64
	for _, rec := range out {
		got = append(got, rec.Column(0).(*array.Int64).Int64Values()...)
	}
	if want := []int64{0, 1, 4, 100, 101}; !slices.Equal(got, want) {
		t.Fatalf("rows left: %v, want %v", got, want)
	}
	if len(outKeys) != len(out) || !slices.Equal(outKeys[len(outKeys)-1], []string{"k"}) {
		t.Fatalf("keys %v beside %d batches", outKeys, len(out))
	}
}
