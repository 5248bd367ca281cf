package table_test

import (
	"errors"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/commit"
	"github.com/stratadb/strata/table"
	"github.com/stratadb/strata/table/evolve"
	"github.com/stratadb/strata/table/expr"
	"github.com/stratadb/strata/table/format"
	"github.com/stratadb/strata/table/value"
)

// takeSteps takes keys by id from the latest version of b and returns the
// steps found (each once) and how.
func takeSteps(t *testing.T, b blob.Bucket, keys ...string) (map[int64]bool, table.TakeResult) {
	t.Helper()
	s, err := table.Open(ctx, b, nil)
	if err != nil {
		t.Fatal(err)
	}
	vals := make([]value.Value, len(keys))
	for i, k := range keys {
		vals[i] = value.String(k)
	}
	recs, res, err := s.Take(ctx, "id", vals, []string{"id", "step"})
	if err != nil {
		t.Fatal(err)
	}
	got := map[int64]bool{}
	for _, rec := range recs {
		for i := range int(rec.NumRows()) {
			step := rec.Column(1).(*array.Int64).Value(i)
			if got[step] || rec.Column(0).(*array.String).Value(i) != uuidOf(int(step)) {
				t.Fatalf("row %d found twice, or under another id", step)
			}
			got[step] = true
		}
		rec.Release()
	}
	return got, res
}

func wantSteps(t *testing.T, got map[int64]bool, want ...int64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("found steps %v, want %v", got, want)
	}
	for _, s := range want {
		if !got[s] {
			t.Fatalf("found steps %v, want %v", got, want)
		}
	}
}

// A key index on a string column (UUIDs) is paged by hash: a take of a
// few keys reads the directory and the blocks that hold them, then the
// rows, never the key column of every fragment. It follows a delete and
// an upsert of its keys (the row written again is found by a scan of the
// fragments the index does not cover), as the integer index does.
func TestATakeByUUIDReadsThePagedIndex(t *testing.T) {
	const frags, rows = 8, 500 // 4,000 keys: 16 blocks
	b, tb := uuidTable(t, frags, rows)
	if _, err := tb.CreateIndex(ctx, "id"); err != nil {
		t.Fatal(err)
	}
	m := tb.Current().Manifest()
	ix := m.IndexOn("id")
	if ix.Rows != frags*rows || ix.Blocks != (frags*rows+table.HashBlock-1)/table.HashBlock || ix.Directory == 0 {
		t.Fatalf("index entry %+v", ix)
	}
	counted := blob.NewCounted(b)
	keys := []string{uuidOf(3), uuidOf(1777), uuidOf(3999), "not-a-key"}
	before := counted.Stats()
	got, res := takeSteps(t, counted, keys...)
	wantSteps(t, got, 3, 1777, 3999)
	if res.FromIndex != 3 || res.ScannedFrags != 0 {
		t.Fatalf("take: %+v", res)
	}
	d := counted.Stats().Sub(before)
	// The directory, a block per key (the missing key's too), and each
	// row's fragment's footer and chunks: a few kilobytes of the index.
	if d.RangeGets > 1+4+2*3 || d.Gets > 1 { // and the manifest
		t.Fatalf("take made %d ranged reads and %d whole ones", d.RangeGets, d.Gets)
	}
	if _, _, err := tb.Delete(ctx, expr.Eq("step", value.Int(1777))); err != nil {
		t.Fatal(err)
	}
	got, _ = takeSteps(t, b, keys...)
	wantSteps(t, got, 3, 3999)
	rec := uuidRows(t, 3, 4)
	defer rec.Release()
	if _, err := tb.Upsert(ctx, []string{"id"}, rec); err != nil {
		t.Fatal(err)
	}
	got, res = takeSteps(t, b, keys...)
	wantSteps(t, got, 3, 3999)
	if res.FromIndex != 1 || res.ScannedFrags != 1 {
		t.Fatalf("take after an upsert: %+v", res)
	}
	if _, err := tb.CreateIndex(ctx, "step"); err != nil {
		t.Fatal(err) // an integer index beside it
	}
}

// uuidRows is rows lo … hi-1 of uuidTable's, without artifacts.
func uuidRows(t *testing.T, lo, hi int) arrow.RecordBatch {
	t.Helper()
	bld := array.NewRecordBuilder(memory.DefaultAllocator, uuidSchema)
	defer bld.Release()
	for i := lo; i < hi; i++ {
		bld.Field(0).(*array.StringBuilder).Append(uuidOf(i))
		bld.Field(1).(*array.Int64Builder).Append(int64(i))
		bld.Field(2).(*array.BinaryBuilder).Append(nil)
	}
	return bld.NewRecordBatch()
}

// A key written many times over (a key index is meant for unique keys,
// but a table may hold copies) spans blocks: a lookup finds every copy.
// A block whose bytes changed is a corrupt object, named.
func TestAPagedIndexFindsAKeyAcrossBlocksAndRefusesACorruptOne(t *testing.T) {
	b, err := blob.Open(ctx, "mem://")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := commit.Create(ctx, b, uuidSchema, nil, nil); err != nil {
		t.Fatal(err)
	}
	tb, err := commit.OpenTable(ctx, b, nil)
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		bld := array.NewRecordBuilder(memory.DefaultAllocator, uuidSchema)
		for i := range 400 {
			id := uuidOf(i)
			if i%2 == 0 {
				id = uuidOf(7) // 603 copies of one key, over three blocks at least
			}
			bld.Field(0).(*array.StringBuilder).Append(id)
			bld.Field(1).(*array.Int64Builder).Append(int64(i))
			bld.Field(2).(*array.BinaryBuilder).Append(nil)
		}
		rec := bld.NewRecordBatch()
		bld.Release()
		if _, err := tb.Append(ctx, rec); err != nil {
			t.Fatal(err)
		}
		rec.Release()
	}
	if _, err := tb.CreateIndex(ctx, "id"); err != nil {
		t.Fatal(err)
	}
	s := tb.Current()
	recs, res, err := s.Take(ctx, "id", []value.Value{value.String(uuidOf(7)), value.String(uuidOf(9))}, []string{"step"})
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, rec := range recs {
		n += rec.NumRows()
		rec.Release()
	}
	if n != 606 || res.FromIndex != 606 {
		t.Fatalf("took %d rows (%+v), want 603 copies of one key and 3 of the other", n, res)
	}
	// Corrupt the blocks: the object replaced by one with bytes changed.
	ix := s.Manifest().IndexOn("id")
	data, err := b.Get(ctx, ix.Key)
	if err != nil {
		t.Fatal(err)
	}
	for i := int64(12); i < ix.Directory; i += 50 {
		data[i] ^= 0xff // every block
	}
	if err := b.Delete(ctx, ix.Key); err != nil {
		t.Fatal(err)
	}
	if err := b.PutIfAbsent(ctx, ix.Key, data); err != nil {
		t.Fatal(err)
	}
	fresh, err := table.Open(ctx, b, nil)
	if err != nil {
		t.Fatal(err)
	}
	var corrupt *format.CorruptError
	if _, _, err := fresh.Take(ctx, "id", []value.Value{value.String(uuidOf(7))}, nil); !errors.As(err, &corrupt) || corrupt.Key != ix.Key {
		t.Fatalf("take through a corrupt block: %v, want a CorruptError naming %s", err, ix.Key)
	}
}

// An overwrite or a restore that gives the indexed column another type
// (or takes it away) drops the index: its object holds keys of the other
// type, and a take or an upsert by the column scans instead. One that
// keeps the column as it was keeps the index.
func TestAnIndexWhoseColumnChangedTypeIsDropped(t *testing.T) {
	count := func(t *testing.T, b blob.Bucket, col string, key value.Value) int64 {
		t.Helper()
		s, err := table.Open(ctx, b, nil)
		if err != nil {
			t.Fatal(err)
		}
		recs, _, err := s.Take(ctx, col, []value.Value{key}, nil)
		if err != nil {
			t.Fatalf("take by %s: %v", col, err)
		}
		var n int64
		for _, r := range recs {
			n += r.NumRows()
			r.Release()
		}
		return n
	}
	t.Run("overwrite", func(t *testing.T) {
		b, tb := uuidTable(t, 2, 10)
		if _, err := tb.CreateIndex(ctx, "id"); err != nil {
			t.Fatal(err)
		}
		sc := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}}, nil)
		bld := array.NewRecordBuilder(memory.DefaultAllocator, sc)
		bld.Field(0).(*array.Int64Builder).AppendValues([]int64{1, 2, 3}, nil)
		rec := bld.NewRecordBatch()
		bld.Release()
		defer rec.Release()
		if _, err := tb.Overwrite(ctx, sc, rec); err != nil {
			t.Fatal(err)
		}
		if ix := tb.Current().Manifest().Indexes; len(ix) != 0 {
			t.Fatalf("indexes after an overwrite of id as integers: %+v", ix)
		}
		if n := count(t, b, "id", value.Int(2)); n != 1 {
			t.Fatalf("take: %d rows, want 1", n)
		}
	})
	t.Run("restore", func(t *testing.T) {
		b, tb := uuidTable(t, 2, 10)
		if _, err := tb.CreateIndex(ctx, "step"); err != nil {
			t.Fatal(err)
		}
		before := tb.Current().Version() // step an integer, indexed
		if _, err := tb.Alter(ctx, evolve.ColumnChange{Op: evolve.DropColumn, Column: "step"}); err != nil {
			t.Fatal(err)
		}
		if _, err := tb.Alter(ctx, evolve.ColumnChange{Op: evolve.AddColumn, Column: "step", Type: arrow.BinaryTypes.String}); err != nil {
			t.Fatal(err)
		}
		if _, err := tb.CreateIndex(ctx, "step"); err != nil {
			t.Fatal(err)
		}
		if _, err := tb.Restore(ctx, before); err != nil {
			t.Fatal(err)
		}
		if ix := tb.Current().Manifest().Indexes; len(ix) != 0 {
			t.Fatalf("indexes after a restore to step as integers: %+v", ix)
		}
		if n := count(t, b, "step", value.Int(5)); n != 1 {
			t.Fatalf("take: %d rows, want 1", n)
		}
		if _, err := tb.CreateIndex(ctx, "id"); err != nil {
			t.Fatal(err)
		}
		if _, err := tb.Restore(ctx, before); err != nil {
			t.Fatal(err)
		}
		if ix := tb.Current().Manifest().Indexes; len(ix) != 1 || ix[0].Column != "id" {
			t.Fatalf("indexes after a restore that keeps id: %+v", ix)
		}
	})
}
