package evolve_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/stratadb/strata/table/evolve"
)

var conformSchema = arrow.NewSchema([]arrow.Field{
	{Name: "id", Type: arrow.PrimitiveTypes.Int64},
	{Name: "msg", Type: arrow.BinaryTypes.String, Nullable: true},
	{Name: "meta", Type: arrow.StructOf(
		arrow.Field{Name: "score", Type: arrow.PrimitiveTypes.Float64},
		arrow.Field{Name: "tags", Type: arrow.ListOf(arrow.BinaryTypes.String), Nullable: true},
	), Nullable: true},
}, nil)

// batchOf builds a batch of schema from per-column appenders.
func batchOf(t *testing.T, mem memory.Allocator, schema *arrow.Schema, rows int, fill func(b *array.RecordBuilder, row int)) arrow.RecordBatch {
	t.Helper()
	b := array.NewRecordBuilder(mem, schema)
	defer b.Release()
	for i := range rows {
		fill(b, i)
	}
	return b.NewRecordBatch()
}

// arrayData builds an array from raw buffers, with no checks: malformed
// input as a careless or hostile client would send it.
func arrayData(dt arrow.DataType, n, nulls int, bufs ...[]byte) arrow.Array {
	buffers := make([]*memory.Buffer, len(bufs))
	for i, b := range bufs {
		if b != nil {
			buffers[i] = memory.NewBufferBytes(b)
		}
	}
	return array.MakeFromData(array.NewData(dt, n, buffers, nil, nulls, 0))
}

func i32s(v ...int32) []byte {
	out := make([]byte, 4*len(v))
	for i, x := range v {
		out[4*i], out[4*i+1], out[4*i+2], out[4*i+3] = byte(x), byte(x>>8), byte(x>>16), byte(x>>24)
	}
	return out
}

func i64s(v ...int64) []byte {
	out := make([]byte, 8*len(v))
	for i, x := range v {
		for k := range 8 {
			out[8*i+k] = byte(x >> (8 * k))
		}
	}
	return out
}

func TestConformRefusesWhatTheTableCannotTake(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	idOnly := func(fill func(*array.Int64Builder, int)) func(b *array.RecordBuilder, row int) {
		return func(b *array.RecordBuilder, row int) {
			fill(b.Field(0).(*array.Int64Builder), row)
			b.Field(1).AppendNull()
			b.Field(2).AppendNull()
		}
	}
	cases := []struct {
		name   string
		rec    func() arrow.RecordBatch
		row    int64
		column string
		says   string
	}{
		{"a null in a non-nullable column names its row and column", func() arrow.RecordBatch {
			return batchOf(t, mem, conformSchema, 5, idOnly(func(b *array.Int64Builder, row int) {
				if row == 3 {
					b.AppendNull()
				} else {
					b.Append(int64(row))
				}
			}))
		}, 3, "id", "null in a non-nullable field"},
		{"a null in a non-nullable nested field under a present parent", func() arrow.RecordBatch {
			return batchOf(t, mem, conformSchema, 3, func(b *array.RecordBuilder, row int) {
				b.Field(0).(*array.Int64Builder).Append(int64(row))
				b.Field(1).AppendNull()
				sb := b.Field(2).(*array.StructBuilder)
				sb.Append(true)
				if row == 2 {
					sb.FieldBuilder(0).AppendNull()
				} else {
					sb.FieldBuilder(0).(*array.Float64Builder).Append(1)
				}
				sb.FieldBuilder(1).AppendNull()
			})
		}, 2, "meta.score", "null in a non-nullable field"},
		{"an unknown column", func() arrow.RecordBatch {
			s := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}, {Name: "mgs", Type: arrow.BinaryTypes.String}}, nil)
			return batchOf(t, mem, s, 1, func(b *array.RecordBuilder, row int) {
				b.Field(0).(*array.Int64Builder).Append(1)
				b.Field(1).(*array.StringBuilder).Append("typo")
			})
		}, -1, "mgs", "no such column"},
		{"a missing non-nullable column", func() arrow.RecordBatch {
			s := arrow.NewSchema([]arrow.Field{{Name: "msg", Type: arrow.BinaryTypes.String}}, nil)
			return batchOf(t, mem, s, 1, func(b *array.RecordBuilder, row int) { b.Field(0).(*array.StringBuilder).Append("x") })
		}, -1, "id", "missing"},
		{"a type that would lose values", func() arrow.RecordBatch {
			s := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Float64}}, nil)
			return batchOf(t, mem, s, 1, func(b *array.RecordBuilder, row int) { b.Field(0).(*array.Float64Builder).Append(1.5) })
		}, -1, "id", "without loss"},
		{"string offsets out of order", func() arrow.RecordBatch {
			s := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}, {Name: "msg", Type: arrow.BinaryTypes.String}}, nil)
			ids := arrayData(arrow.PrimitiveTypes.Int64, 3, 0, nil, i64s(1, 2, 3))
			msgs := arrayData(arrow.BinaryTypes.String, 3, 0, nil, i32s(0, 5, 2, 8), []byte("abcdefgh"))
			defer ids.Release()
			defer msgs.Release()
			return array.NewRecordBatch(s, []arrow.Array{ids, msgs}, 3)
		}, -1, "msg", "malformed"},
		{"negative string offsets", func() arrow.RecordBatch {
			s := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}, {Name: "msg", Type: arrow.BinaryTypes.String}}, nil)
			ids := arrayData(arrow.PrimitiveTypes.Int64, 2, 0, nil, i64s(1, 2))
			msgs := arrayData(arrow.BinaryTypes.String, 2, 0, nil, i32s(-4, 0, 2), []byte("ab"))
			defer ids.Release()
			defer msgs.Release()
			return array.NewRecordBatch(s, []arrow.Array{ids, msgs}, 2)
		}, -1, "msg", "malformed"},
		{"a null count that does not match the validity bitmap", func() arrow.RecordBatch {
			s := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}}, nil)
			ids := arrayData(arrow.PrimitiveTypes.Int64, 3, 0, []byte{0b101}, i64s(1, 0, 3)) // row 1 is null, count says 0
			defer ids.Release()
			return array.NewRecordBatch(s, []arrow.Array{ids}, 3)
		}, -1, "id", "malformed"},
		{"a string that is not UTF-8", func() arrow.RecordBatch {
			s := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}, {Name: "msg", Type: arrow.BinaryTypes.String}}, nil)
			ids := arrayData(arrow.PrimitiveTypes.Int64, 1, 0, nil, i64s(1))
			msgs := arrayData(arrow.BinaryTypes.String, 1, 0, nil, i32s(0, 2), []byte{0xff, 0xfe})
			defer ids.Release()
			defer msgs.Release()
			return array.NewRecordBatch(s, []arrow.Array{ids, msgs}, 1)
		}, -1, "msg", "utf8"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rec := c.rec()
			defer rec.Release()
			out, err := evolve.Conform(conformSchema, rec, evolve.ConformOptions{Allocator: mem})
			if err == nil {
				out.Release()
				t.Fatal("accepted")
			}
			var ie *evolve.InputError
			if !errors.As(err, &ie) || !errors.Is(err, evolve.ErrBadInput) {
				t.Fatalf("error %v is not an *InputError", err)
			}
			if ie.Row != c.row || ie.Column != c.column || !strings.Contains(err.Error(), c.says) {
				t.Fatalf("error %q: row %d column %q, want row %d column %q saying %q", err, ie.Row, ie.Column, c.row, c.column, c.says)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("error %q is not one line", err)
			}
		})
	}
}

func TestConformTakesWhatConvertsWithoutLoss(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	// Columns in another order, id as int32, msg dictionary-encoded, meta
	// missing (nullable: nulls), tags' list element named differently.
	in := arrow.NewSchema([]arrow.Field{
		{Name: "msg", Type: &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int8, ValueType: arrow.BinaryTypes.String}},
		{Name: "id", Type: arrow.PrimitiveTypes.Int32, Nullable: true},
	}, nil)
	rec := batchOf(t, mem, in, 4, func(b *array.RecordBuilder, row int) {
		if err := b.Field(0).(*array.BinaryDictionaryBuilder).AppendString([]string{"a", "b"}[row%2]); err != nil {
			t.Fatal(err)
		}
		b.Field(1).(*array.Int32Builder).Append(int32(10 * row))
	})
	defer rec.Release()
	out, err := evolve.Conform(conformSchema, rec, evolve.ConformOptions{Allocator: mem})
	if err != nil {
		t.Fatal(err)
	}
	defer out.Release()
	if !out.Schema().Equal(conformSchema) {
		t.Fatalf("schema %s", out.Schema())
	}
	ids := out.Column(0).(*array.Int64)
	msgs := out.Column(1).(*array.String)
	for i := range 4 {
		if ids.Value(i) != int64(10*i) || msgs.Value(i) != []string{"a", "b"}[i%2] || !out.Column(2).IsNull(i) {
			t.Fatalf("row %d: %d %q", i, ids.Value(i), msgs.Value(i))
		}
	}
	// A nested column whose list element is named "element" and
	// non-nullable fields marked nullable, holding no nulls.
	tagsIn := arrow.ListOfField(arrow.Field{Name: "element", Type: arrow.BinaryTypes.String, Nullable: true})
	in2 := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		{Name: "meta", Type: arrow.StructOf(
			arrow.Field{Name: "score", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
			arrow.Field{Name: "tags", Type: tagsIn, Nullable: true}), Nullable: true},
	}, nil)
	rec2 := batchOf(t, mem, in2, 2, func(b *array.RecordBuilder, row int) {
		b.Field(0).(*array.Int64Builder).Append(int64(row))
		sb := b.Field(1).(*array.StructBuilder)
		sb.Append(true)
		sb.FieldBuilder(0).(*array.Float64Builder).Append(0.5)
		lb := sb.FieldBuilder(1).(*array.ListBuilder)
		lb.Append(true)
		lb.ValueBuilder().(*array.StringBuilder).Append("x")
	})
	defer rec2.Release()
	out2, err := evolve.Conform(conformSchema, rec2, evolve.ConformOptions{Allocator: mem})
	if err != nil {
		t.Fatal(err)
	}
	defer out2.Release()
	if !out2.Schema().Equal(conformSchema) {
		t.Fatalf("schema %s", out2.Schema())
	}
}

func TestCheckStorable(t *testing.T) {
	f := func(name string, dt arrow.DataType) arrow.Field {
		return arrow.Field{Name: name, Type: dt, Nullable: true}
	}
	refused := map[string]*arrow.Schema{
		"no fields":       arrow.NewSchema(nil, nil),
		"an empty name":   arrow.NewSchema([]arrow.Field{f("", arrow.PrimitiveTypes.Int64)}, nil),
		"a repeated name": arrow.NewSchema([]arrow.Field{f("a", arrow.PrimitiveTypes.Int64), f("a", arrow.BinaryTypes.String)}, nil),
		"a repeated nested name": arrow.NewSchema([]arrow.Field{f("s", arrow.StructOf(
			f("x", arrow.PrimitiveTypes.Int64), f("x", arrow.PrimitiveTypes.Int64)))}, nil),
		"a dense union": arrow.NewSchema([]arrow.Field{f("u", arrow.DenseUnionOf(
			[]arrow.Field{f("a", arrow.PrimitiveTypes.Int64)}, []arrow.UnionTypeCode{0}))}, nil),
		"a duration":               arrow.NewSchema([]arrow.Field{f("d", arrow.FixedWidthTypes.Duration_ms)}, nil),
		"an empty struct":          arrow.NewSchema([]arrow.Field{f("s", arrow.StructOf())}, nil),
		"a name that is not UTF-8": arrow.NewSchema([]arrow.Field{f("a\xffb", arrow.PrimitiveTypes.Int64)}, nil),
		"a newline in a name":      arrow.NewSchema([]arrow.Field{f("a\nb", arrow.PrimitiveTypes.Int64)}, nil),
		"a NUL in a nested name":   arrow.NewSchema([]arrow.Field{f("s", arrow.StructOf(f("x\x00", arrow.PrimitiveTypes.Int64)))}, nil),
		"a C1 control in a name":   arrow.NewSchema([]arrow.Field{f("a\u0085", arrow.PrimitiveTypes.Int64)}, nil),
		"a name over 1,024 bytes":  arrow.NewSchema([]arrow.Field{f(strings.Repeat("x", 1025), arrow.PrimitiveTypes.Int64)}, nil),
		"an unknown time zone":     arrow.NewSchema([]arrow.Field{f("ts", &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "Mars/Olympus"})}, nil),
		"an unknown nested zone": arrow.NewSchema([]arrow.Field{f("l", arrow.ListOf(
			&arrow.TimestampType{Unit: arrow.Second, TimeZone: "+2 hours"}))}, nil),
	}
	for name, s := range refused {
		if err := evolve.CheckStorable(s); !errors.Is(err, evolve.ErrUnsupportedSchema) {
			t.Errorf("%s: %v", name, err)
		}
	}
	ok := arrow.NewSchema([]arrow.Field{
		f("s", arrow.StructOf(f("x", arrow.PrimitiveTypes.Int64))),
		f("m", arrow.MapOf(arrow.BinaryTypes.String, arrow.ListOf(arrow.PrimitiveTypes.Float64))),
		f("l", arrow.LargeListOf(arrow.ListOf(arrow.BinaryTypes.Binary))),
		f(strings.Repeat("é", 512), arrow.PrimitiveTypes.Int64), // 1,024 bytes
		f("café", arrow.PrimitiveTypes.Int64),
		f("a.b", arrow.PrimitiveTypes.Int64),
		f("run id", arrow.PrimitiveTypes.Int64),
		f("naive", &arrow.TimestampType{Unit: arrow.Microsecond}),
		f("utc", &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}),
		f("paris", &arrow.TimestampType{Unit: arrow.Millisecond, TimeZone: "Europe/Paris"}),
		f("offset", &arrow.TimestampType{Unit: arrow.Nanosecond, TimeZone: "+02:00"}),
	}, nil)
	if err := evolve.CheckStorable(ok); err != nil {
		t.Fatal(err)
	}
}

// A time zone Arrow cannot resolve would store values that no reader can
// show: it is refused, naming the column and the zone.
func TestAnUnknownTimeZoneIsRefusedNamingTheColumnAndZone(t *testing.T) {
	s := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "meta", Type: arrow.StructOf(arrow.Field{Name: "at", Type: &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "Mars/Olympus"}})}}, nil)
	err := evolve.CheckStorable(s)
	var ue *evolve.UnsupportedSchemaError
	if !errors.As(err, &ue) || ue.Field != "meta.at" || !strings.Contains(err.Error(), `"Mars/Olympus"`) {
		t.Fatalf("got %v", err)
	}
}

// An input error names only the types it knows: no empty "input: " when
// the input's type is not one (a JSON value that does not fit).
func TestInputErrorNamesTheTypesItKnows(t *testing.T) {
	for _, c := range []struct {
		err  evolve.InputError
		want string
	}{
		{evolve.InputError{Row: 0, Column: "id", Want: "int64", Reason: "value does not fit the column"}, `table: row 0: column "id": value does not fit the column (table: int64)`},
		{evolve.InputError{Row: -1, Want: "int64", Got: "utf8", Reason: "types differ"}, `table: types differ (table: int64; input: utf8)`},
		{evolve.InputError{Row: 2, Got: "utf8", Reason: "no such column"}, `table: row 2: no such column (input: utf8)`},
		{evolve.InputError{Row: -1, Reason: "empty"}, `table: empty`},
	} {
		if got := c.err.Error(); got != c.want {
			t.Errorf("got %s, want %s", got, c.want)
		}
	}
}
