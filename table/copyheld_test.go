package table_test

import (
	"errors"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/harness/rollouts"
	"github.com/stratadb/strata/table"
	"github.com/stratadb/strata/table/evolve"
	"github.com/stratadb/strata/table/format"
	"github.com/stratadb/strata/table/fragment"
)

// held encodes rows as a shard's flush object is: a fragment whose footer
// holds one more pair, different for each object.
func held(t *testing.T, schema *arrow.Schema, rec arrow.RecordBatch, seal string) ([]byte, format.Fragment) {
	t.Helper()
	data, f, err := fragment.EncodeWith(schema, []arrow.RecordBatch{rec}, func([]byte, format.Fragment) (string, string) {
		return "test.seal", seal
	})
	if err != nil {
		t.Fatal(err)
	}
	return data, f
}

// Objects held in memory, written as fragments with a pair of their own in
// the footer, are copied page by page into one fragment: it holds their
// rows in order, the statistics merged from theirs, and not the pair. A
// damaged object is a CorruptError naming it; one written under another
// schema is not copyable.
func TestHeldObjectsAreCopiedIntoOneFragment(t *testing.T) {
	b, err := blob.Open(ctx, "mem://")
	if err != nil {
		t.Fatal(err)
	}
	mem := memory.NewGoAllocator()
	var copies []*table.HeldCopy
	var want []int64
	var objects [][]byte
	for w := range 3 {
		rec := rollouts.Batch(mem, 42, w, 0, 50+w)
		defer rec.Release()
		want = append(want, rec.Column(0).(*array.Int64).Int64Values()...)
		data, f := held(t, rollouts.Schema, rec, string(rune('a'+w)))
		objects = append(objects, data)
		h, err := table.CheckHeld(rollouts.Schema, "held-"+string(rune('a'+w)), data, f.Rows, f.Columns, "test.seal")
		if err != nil {
			t.Fatalf("object %d: %v", w, err)
		}
		copies = append(copies, h)
	}
	out, err := table.WriteHeldCopies(ctx, b, rollouts.Schema, "data/copied.parquet", copies, 0, "test.seal")
	if err != nil {
		t.Fatal(err)
	}
	if out.Rows != int64(len(want)) || len(out.Columns) != rollouts.Schema.NumFields() || out.SchemaID != evolve.SchemaID(rollouts.Schema) {
		t.Fatalf("the copy: %d rows, %d column statistics, schema %d; want %d rows, %d columns", out.Rows, len(out.Columns), out.SchemaID, len(want), rollouts.Schema.NumFields())
	}
	data, err := b.Get(ctx, out.Key)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok, _, err := fragment.FooterValue(data, "test.seal"); err != nil || ok {
		t.Fatalf("the copy's footer holds the left-out pair: %v %v", ok, err)
	}
	recs, err := fragment.Decode(ctx, out.Key, data)
	if err != nil {
		t.Fatal(err)
	}
	var got []int64
	for _, rec := range recs {
		got = append(got, rec.Column(0).(*array.Int64).Int64Values()...)
		rec.Release()
	}
	if len(got) != len(want) {
		t.Fatalf("%d rows copied, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("row %d: id %d, want %d", i, got[i], want[i])
		}
	}
	if lo, hi := out.Columns[0].Min, out.Columns[0].Max; lo == nil || hi == nil {
		t.Fatalf("the copy's id statistics lack a bound: %+v", out.Columns[0])
	}

	damaged := append([]byte(nil), objects[1]...)
	for i := 200; i < 400; i++ {
		damaged[i] ^= 0xff
	}
	f1 := copies[1]
	var ce *format.CorruptError
	if _, err := table.CheckHeld(rollouts.Schema, "held-damaged", damaged, f1.Rows(), out.Columns, "test.seal"); !errors.As(err, &ce) || ce.Key != "held-damaged" {
		t.Fatalf("a damaged object: %v, want a CorruptError naming it", err)
	}
	other := arrow.NewSchema(append(rollouts.Schema.Fields(), arrow.Field{Name: "extra", Type: arrow.PrimitiveTypes.Int64, Nullable: true}), nil)
	if _, err := table.CheckHeld(other, "held-a", objects[0], int64(50), out.Columns, "test.seal"); !errors.Is(err, table.ErrNotCopyable) {
		t.Fatalf("an object of another schema: %v, want ErrNotCopyable", err)
	}
}
