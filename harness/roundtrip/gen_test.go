package roundtrip_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/arrow-go/v18/arrow/decimal256"
	"github.com/apache/arrow-go/v18/arrow/float16"

	"github.com/stratadb/strata/harness/testenv"
)

// scalars are every scalar type a table can hold.
var scalars = []arrow.DataType{
	arrow.FixedWidthTypes.Boolean,
	arrow.PrimitiveTypes.Int8, arrow.PrimitiveTypes.Int16, arrow.PrimitiveTypes.Int32, arrow.PrimitiveTypes.Int64,
	arrow.PrimitiveTypes.Uint8, arrow.PrimitiveTypes.Uint16, arrow.PrimitiveTypes.Uint32, arrow.PrimitiveTypes.Uint64,
	arrow.FixedWidthTypes.Float16, arrow.PrimitiveTypes.Float32, arrow.PrimitiveTypes.Float64,
	arrow.BinaryTypes.String, arrow.BinaryTypes.LargeString, arrow.BinaryTypes.Binary, arrow.BinaryTypes.LargeBinary,
	&arrow.FixedSizeBinaryType{ByteWidth: 4},
	arrow.FixedWidthTypes.Date32, arrow.FixedWidthTypes.Time32ms, arrow.FixedWidthTypes.Time64us,
	&arrow.TimestampType{Unit: arrow.Second, TimeZone: "UTC"},
	&arrow.TimestampType{Unit: arrow.Millisecond},
	&arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"},
	&arrow.TimestampType{Unit: arrow.Nanosecond, TimeZone: "UTC"},
	&arrow.Decimal128Type{Precision: 12, Scale: 3},
	&arrow.Decimal256Type{Precision: 40, Scale: 5},
}

type gen struct{ r *rand.Rand }

// schema makes a random schema: a non-nullable int64 "id" first, then one
// to six columns of random types, nested up to two levels.
func (g *gen) schema() *arrow.Schema {
	fields := []arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}}
	for i := range 1 + g.r.IntN(6) {
		fields = append(fields, arrow.Field{Name: fmt.Sprintf("c%d", i), Type: g.typ(0), Nullable: g.r.IntN(2) == 0})
	}
	return arrow.NewSchema(fields, nil)
}

func (g *gen) typ(depth int) arrow.DataType {
	if depth < 2 && g.r.IntN(4) == 0 {
		switch g.r.IntN(4) {
		case 0:
			var fs []arrow.Field
			for i := range 1 + g.r.IntN(3) {
				fs = append(fs, arrow.Field{Name: fmt.Sprintf("f%d", i), Type: g.typ(depth + 1), Nullable: g.r.IntN(2) == 0})
			}
			return arrow.StructOf(fs...)
		case 1:
			return arrow.ListOfField(arrow.Field{Name: "item", Type: g.typ(depth + 1), Nullable: g.r.IntN(2) == 0})
		case 2:
			return arrow.LargeListOfField(arrow.Field{Name: "item", Type: g.typ(depth + 1), Nullable: true})
		case 3:
			m := arrow.MapOf(arrow.BinaryTypes.String, g.typ(depth+1))
			m.SetItemNullable(g.r.IntN(2) == 0)
			return m
		}
	}
	return scalars[g.r.IntN(len(scalars))]
}

// batch makes rows rows of schema, ids from first.
func (g *gen) batch(schema *arrow.Schema, first int64, rows int) arrow.RecordBatch {
	b := array.NewRecordBuilder(testenv.Arrow, schema)
	defer b.Release()
	for i := range rows {
		b.Field(0).(*array.Int64Builder).Append(first + int64(i))
		for j := 1; j < schema.NumFields(); j++ {
			g.value(b.Field(j), schema.Field(j))
		}
	}
	return b.NewRecordBatch()
}

// words are strings with multi-byte characters, quotes and commas in them.
var words = []string{"alpha", "βeta", "x,y", `say "hi"`, "naïve", "日本", "tab\there", "z", "0", "-1"}

func (g *gen) value(b array.Builder, f arrow.Field) {
	if f.Nullable && g.r.IntN(5) == 0 {
		b.AppendNull()
		return
	}
	r := g.r
	switch bb := b.(type) {
	case *array.BooleanBuilder:
		bb.Append(r.IntN(2) == 0)
	case *array.Int8Builder:
		bb.Append(int8(r.IntN(256) - 128))
	case *array.Int16Builder:
		bb.Append(int16(r.IntN(65536) - 32768))
	case *array.Int32Builder:
		bb.Append(r.Int32() - 1<<30)
	case *array.Int64Builder:
		bb.Append(r.Int64() - 1<<62)
	case *array.Uint8Builder:
		bb.Append(uint8(r.IntN(256)))
	case *array.Uint16Builder:
		bb.Append(uint16(r.IntN(65536)))
	case *array.Uint32Builder:
		bb.Append(r.Uint32())
	case *array.Uint64Builder:
		bb.Append(r.Uint64())
	case *array.Float16Builder:
		bb.Append(float16.New(float32(r.IntN(2000)-1000) / 8))
	case *array.Float32Builder:
		bb.Append(float32(r.NormFloat64() * 1000))
	case *array.Float64Builder:
		bb.Append(r.NormFloat64() * math.Pow(10, float64(r.IntN(20)-10)))
	case *array.StringBuilder:
		bb.Append(g.text())
	case *array.LargeStringBuilder:
		bb.Append(g.text())
	case *array.BinaryBuilder:
		bb.Append(g.bytes())
	case *array.FixedSizeBinaryBuilder:
		bb.Append([]byte{byte(r.IntN(256)), byte(r.IntN(256)), 0, byte(r.IntN(256))})
	case *array.Date32Builder:
		bb.Append(arrow.Date32(r.IntN(40000)))
	case *array.Time32Builder:
		bb.Append(arrow.Time32(r.IntN(86_400_000)))
	case *array.Time64Builder:
		bb.Append(arrow.Time64(r.Int64N(86_400_000_000)))
	case *array.TimestampBuilder:
		bb.Append(arrow.Timestamp(r.Int64N(4_000_000_000) * unitScale(f.Type.(*arrow.TimestampType).Unit)))
	case *array.Decimal128Builder:
		bb.Append(decimal128.FromI64(r.Int64N(1_000_000_000) - 500_000_000))
	case *array.Decimal256Builder:
		bb.Append(decimal256.FromI64(r.Int64N(1_000_000_000_000) - 500_000_000_000))
	case *array.StructBuilder:
		bb.Append(true)
		st := f.Type.(*arrow.StructType)
		for i := range st.NumFields() {
			g.value(bb.FieldBuilder(i), st.Field(i))
		}
	case *array.MapBuilder:
		bb.Append(true)
		m := f.Type.(*arrow.MapType)
		seen := map[string]bool{}
		for range r.IntN(3) {
			k := words[r.IntN(len(words))]
			if seen[k] {
				continue
			}
			seen[k] = true
			bb.KeyBuilder().(*array.StringBuilder).Append(k)
			g.value(bb.ItemBuilder(), m.ItemField())
		}
	case array.ListLikeBuilder:
		bb.Append(true)
		elem := f.Type.(arrow.ListLikeType).ElemField()
		for range r.IntN(4) {
			g.value(bb.ValueBuilder(), elem)
		}
	case *array.BinaryDictionaryBuilder:
		panic("no dictionaries in a table")
	default:
		if lb, ok := b.(*array.BinaryBuilder); ok { // large binary
			lb.Append(g.bytes())
			return
		}
		panic(fmt.Sprintf("no generator for %T", b))
	}
}

// unitScale keeps timestamps whole seconds in any unit, so that they print
// and parse the same in every text format.
func unitScale(u arrow.TimeUnit) int64 {
	return [...]int64{1, 1_000, 1_000_000, 1_000_000_000}[u]
}

func (g *gen) text() string {
	var parts []string
	for range 1 + g.r.IntN(3) {
		parts = append(parts, words[g.r.IntN(len(words))])
	}
	return strings.Join(parts, " ")
}

func (g *gen) bytes() []byte {
	out := make([]byte, 1+g.r.IntN(12))
	for i := range out {
		out[i] = byte(g.r.IntN(256))
	}
	return out
}
