package table_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/commit"
	"github.com/stratadb/strata/table"
	"github.com/stratadb/strata/table/expr"
	"github.com/stratadb/strata/table/value"
)

var uuidSchema = arrow.NewSchema([]arrow.Field{
	{Name: "id", Type: arrow.BinaryTypes.String},
	{Name: "step", Type: arrow.PrimitiveTypes.Int64},
	{Name: "artifact", Type: arrow.BinaryTypes.Binary},
}, nil)

// uuidOf is row i's id, as a UUID is written.
func uuidOf(i int) string {
	return fmt.Sprintf("%08x-%04x-4%03x-8%03x-%012x", uint32(i*2654435761), i%0xffff, i%0xfff, (i*7)%0xfff, uint64(i)*0x9e3779b97f4a7c15>>16)
}

// noise is byte i of incompressible bytes.
func noise(i int) byte {
	x := uint32(i) * 0x9e3779b9
	x ^= x >> 15
	x *= 0x85ebca6b
	return byte(x >> 13)
}

// uuidTable commits fragments of rows rows each, row i holding
// uuidOf(i), step i and 2 KiB of artifact.
func uuidTable(t *testing.T, fragments, rows int) (blob.Bucket, *commit.Table) {
	t.Helper()
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
	for f := range fragments {
		bld := array.NewRecordBuilder(memory.DefaultAllocator, uuidSchema)
		for i := f * rows; i < (f+1)*rows; i++ {
			bld.Field(0).(*array.StringBuilder).Append(uuidOf(i))
			bld.Field(1).(*array.Int64Builder).Append(int64(i))
			art := make([]byte, 2048)
			for k := range art {
				art[k] = noise(i*2048 + k)
			}
			bld.Field(2).(*array.BinaryBuilder).Append(art)
		}
		rec := bld.NewRecordBatch()
		bld.Release()
		if _, err := tb.Append(ctx, rec); err != nil {
			t.Fatal(err)
		}
		rec.Release()
	}
	return b, tb
}

// Take finds rows by a string key (a UUID) without a key index in two
// steps: the key column alone of every fragment its statistics do not
// rule out (its footer and that column's chunk: two ranged reads, in one
// round trip), then the row groups holding the keys found (their chunks
// alone: the snapshot kept the footers). A key no row holds and a row
// deleted give nothing; a key that is not a value of the column is an
// error before anything is read.
func TestVolumeTakeByAStringKeyReadsTheKeyColumnThenTheRows(t *testing.T) {
	const frags, rows = 10, 100
	b, tb := uuidTable(t, frags, rows)
	if _, _, err := tb.Delete(ctx, expr.Eq("step", value.Int(305))); err != nil {
		t.Fatal(err)
	}
	counted := blob.NewCounted(b)
	s, err := table.Open(ctx, counted, nil)
	if err != nil {
		t.Fatal(err)
	}
	before := counted.Stats()
	keys := []value.Value{value.String(uuidOf(17)), value.String(uuidOf(305)), value.String(uuidOf(742)), value.String("not-a-key")}
	took := func(columns []string) map[int64]string {
		recs, res, err := s.Take(ctx, "id", keys, columns)
		if err != nil {
			t.Fatal(err)
		}
		if res.FromIndex != 0 {
			t.Errorf("%d keys through an index the table lacks", res.FromIndex)
		}
		got := map[int64]string{}
		for _, rec := range recs {
			for i := range int(rec.NumRows()) {
				step := rec.Column(0).(*array.Int64).Value(i)
				got[step] = rec.Column(1).(*array.String).Value(i)
				if rec.NumCols() < 3 {
					continue
				}
				if art := rec.Column(2).(*array.Binary).Value(i); len(art) != 2048 || art[5] != noise(int(step)*2048+5) {
					t.Errorf("row %d: the artifact differs from the one written", step)
				}
			}
			rec.Release()
		}
		if len(got) != 2 || got[17] != uuidOf(17) || got[742] != uuidOf(742) {
			t.Fatalf("take of %v gave %v, want steps 17 and 742", columns, got)
		}
		return got
	}
	took([]string{"step", "id"})
	d := counted.Stats().Sub(before)
	var table int64
	for _, f := range s.Manifest().Fragments {
		table += f.Bytes
	}
	// The one whole read: fragment 3's deletion vector.
	if d.Gets != 1 || d.RangeGets != 2*frags+2 || d.BytesIn*10 > table {
		t.Fatalf("take made %d whole and %d ranged reads of %d bytes (of %d); want 1 and %d, a tenth of the bytes at most",
			d.Gets, d.RangeGets, d.BytesIn, table, 2*frags+2)
	}
	took([]string{"step", "id", "artifact"})
	if _, _, err := s.Take(ctx, "step", []value.Value{value.String("x")}, nil); !errors.Is(err, expr.ErrBadPredicate) {
		t.Fatalf("take of a string from an integer column: %v, want ErrBadPredicate", err)
	}
	if _, _, err := s.Take(ctx, "nope", []value.Value{value.String("x")}, nil); err == nil {
		t.Fatal("take by a column the table lacks gave no error")
	}
}

// refusing is a Hold that grants up to limit bytes and refuses past it.
type refusing struct{ limit, held int64 }

func (r *refusing) Reserve(_ context.Context, n int64) error {
	if r.held+n > r.limit {
		return errors.New("past the limit")
	}
	r.held += n
	return nil
}

func (r *refusing) Release(n int64) { r.held -= n }

// A take reserves of ScanOptions.Hold each batch it keeps for its answer
// and says what it holds; refused, it ends with that error and holds
// nothing. A key asked for twice is looked for once.
func TestATakeHoldsTheRowsItKeeps(t *testing.T) {
	_, tb := uuidTable(t, 4, 100)
	s := tb.Current()
	keys := []value.Value{value.String(uuidOf(5)), value.String(uuidOf(250)), value.String(uuidOf(5))}
	h := &refusing{limit: 1 << 30}
	recs, res, err := s.TakeWith(ctx, "id", keys, table.ScanOptions{Hold: h})
	if err != nil {
		t.Fatal(err)
	}
	var rows, bytes int64
	for _, rec := range recs {
		rows += rec.NumRows()
		for _, col := range rec.Columns() {
			bytes += int64(col.Data().SizeInBytes())
		}
		rec.Release()
	}
	if rows != 2 || res.Held != bytes || h.held != bytes || bytes == 0 {
		t.Fatalf("took %d rows of %d bytes, holding %d (the Hold says %d); want 2 rows, all held", rows, bytes, res.Held, h.held)
	}
	h = &refusing{limit: 100}
	if recs, res, err := s.TakeWith(ctx, "id", keys, table.ScanOptions{Hold: h}); err == nil || recs != nil || res.Held != 0 || h.held != 0 {
		t.Fatalf("a take past its Hold: %d batches, %v, holding %d (the Hold says %d)", len(recs), err, res.Held, h.held)
	}
}
