package jsonrows

import (
	"bytes"
	"encoding/json"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// largestWrite records the bytes written and the largest single write.
type largestWrite struct {
	bytes.Buffer
	largest int
}

func (w *largestWrite) Write(p []byte) (int, error) {
	w.largest = max(w.largest, len(p))
	return w.Buffer.Write(p)
}

// awkwardString is n bytes of text that JSON escapes in every way:
// HTML characters, control characters, quotes, multi-byte runes, line
// separators, invalid bytes and runs of continuation bytes, all likely
// to fall on a piece's edge.
func awkwardString(rng *rand.Rand, n int) string {
	parts := []string{"a", "<", ">", "&", "\"", "\\", "\n", "\x01", "é", "€", "𝄞", "\u2028", "\u2029", "\xff", "\x80\x80\x80\x80\x80", "\xe2\x82", "\xf0\x9d\x84"}
	var b strings.Builder
	for b.Len() < n {
		b.WriteString(parts[rng.IntN(len(parts))])
	}
	return b.String()
}

// Rows written as JSON lines hold Arrow's own JSON for each value — HTML
// escaped, every type — but floats, which stay floats, with their keys in
// the schema's order; a string or binary value of megabytes is written in
// pieces, never whole.
func TestJSONLinesAreArrowsInSchemaOrderWithLargeValuesInPieces(t *testing.T) {
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(uint64(seed), 0))
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "zeta", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "alpha", Type: arrow.PrimitiveTypes.Int64},
		{Name: "<html>", Type: arrow.BinaryTypes.Binary, Nullable: true},
		{Name: "ts", Type: &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}},
		{Name: "f", Type: arrow.PrimitiveTypes.Float64},
		{Name: "tags", Type: arrow.ListOf(arrow.BinaryTypes.String)},
		{Name: "big", Type: arrow.BinaryTypes.LargeString},
	}, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	defer b.Release()
	sizes := []int{0, 10, streamedValue - 1, streamedValue + 1, 3 << 20}
	for i, n := range sizes {
		s := awkwardString(rng, n)
		blob := make([]byte, n+rng.IntN(3))
		for k := range blob {
			blob[k] = byte(rng.Uint32())
		}
		if i == 1 {
			b.Field(0).AppendNull()
			b.Field(2).AppendNull()
		} else {
			b.Field(0).(*array.StringBuilder).Append(s)
			b.Field(2).(*array.BinaryBuilder).Append(blob)
		}
		b.Field(1).(*array.Int64Builder).Append(int64(i) - 2)
		b.Field(3).(*array.TimestampBuilder).Append(arrow.Timestamp(1_700_000_000_000_000 + i))
		b.Field(4).(*array.Float64Builder).Append(float64(i) / 3)
		lb := b.Field(5).(*array.ListBuilder)
		lb.Append(true)
		lb.ValueBuilder().(*array.StringBuilder).Append("<" + s[:min(len(s), 100)])
		b.Field(6).(*array.LargeStringBuilder).Append(awkwardString(rng, n))
	}
	rec := b.NewRecordBatch()
	defer rec.Release()
	var want bytes.Buffer
	if err := array.RecordToJSON(rec, &want); err != nil {
		t.Fatal(err)
	}
	var got largestWrite
	if err := New(&got).Write(rec); err != nil {
		t.Fatal(err)
	}
	gotLines := strings.Split(strings.TrimSuffix(got.String(), "\n"), "\n")
	wantLines := strings.Split(strings.TrimSuffix(want.String(), "\n"), "\n")
	if len(gotLines) != len(wantLines) {
		t.Fatalf("%d lines, Arrow writes %d", len(gotLines), len(wantLines))
	}
	for i := range gotLines {
		keys, vals := orderedObject(t, gotLines[i])
		var w map[string]json.RawMessage
		if err := json.Unmarshal([]byte(wantLines[i]), &w); err != nil {
			t.Fatal(err)
		}
		for k, f := range schema.Fields() {
			if keys[k] != f.Name {
				t.Fatalf("line %d: key %d is %q, the schema's is %q", i, k, keys[k], f.Name)
			}
			g := vals[k]
			if f.Type.ID() == arrow.FLOAT64 {
				var gf, wf float64
				if json.Unmarshal(g, &gf) != nil || json.Unmarshal(w[f.Name], &wf) != nil || gf != wf || !bytes.ContainsAny(g, ".e") {
					t.Fatalf("line %d: float %s written %s, Arrow's %s", i, f.Name, g, w[f.Name])
				}
				continue
			}
			if !bytes.Equal(g, w[f.Name]) {
				t.Fatalf("line %d: %s written %.60q, Arrow's %.60q", i, f.Name, g, w[f.Name])
			}
		}
	}
	if got.largest > 1<<20 {
		t.Fatalf("a write of %d bytes: a value of %d bytes was encoded whole", got.largest, 3<<20)
	}
}

// orderedObject reads a JSON object's keys in order and their values.
func orderedObject(t *testing.T, line string) ([]string, []json.RawMessage) {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(line))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		t.Fatalf("not an object: %.80q", line)
	}
	var keys []string
	var vals []json.RawMessage
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			t.Fatal(err)
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			t.Fatal(err)
		}
		keys, vals = append(keys, tok.(string)), append(vals, v)
	}
	return keys, vals
}

// Floats are written so that they read back as floats, the same value:
// integral ones with ".0", -0 as -0.0, NaN and ±Inf as NaN, Infinity and
// -Infinity; a float32 in the shortest form of its own bits.
func TestFloatsStayFloats(t *testing.T) {
	for _, c := range []struct {
		f    float64
		bits int
		want string
	}{
		{1, 64, "1.0"}, {0, 64, "0.0"}, {math.Copysign(0, -1), 64, "-0.0"}, {0.25, 64, "0.25"}, {1e21, 64, "1e+21"}, {-3, 64, "-3.0"},
		{math.NaN(), 64, "NaN"}, {math.Inf(1), 64, "Infinity"}, {math.Inf(-1), 64, "-Infinity"}, {float64(float32(0.1)), 32, "0.1"},
	} {
		if got := string(Float(nil, c.f, c.bits)); got != c.want {
			t.Errorf("Float(%v, %d) = %s, want %s", c.f, c.bits, got, c.want)
		}
	}
}

// Floats inside lists, structs and maps are written as at the top: as
// floats, NaN and ±Infinity as words, not Arrow's "NaN" strings.
func TestNestedFloatsStayFloats(t *testing.T) {
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "l", Type: arrow.ListOf(arrow.PrimitiveTypes.Float64)},
		{Name: "st", Type: arrow.StructOf(arrow.Field{Name: "x", Type: arrow.PrimitiveTypes.Float64}, arrow.Field{Name: "s", Type: arrow.BinaryTypes.String})},
		{Name: "m", Type: arrow.MapOf(arrow.BinaryTypes.String, arrow.PrimitiveTypes.Float32)},
	}, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	defer b.Release()
	lb := b.Field(0).(*array.ListBuilder)
	lb.Append(true)
	lb.ValueBuilder().(*array.Float64Builder).AppendValues([]float64{math.NaN(), math.Inf(1), 1}, nil)
	sb := b.Field(1).(*array.StructBuilder)
	sb.Append(true)
	sb.FieldBuilder(0).(*array.Float64Builder).Append(math.NaN())
	sb.FieldBuilder(1).(*array.StringBuilder).Append("<a>")
	mb := b.Field(2).(*array.MapBuilder)
	mb.Append(true)
	mb.KeyBuilder().(*array.StringBuilder).Append("k")
	mb.ItemBuilder().(*array.Float32Builder).Append(float32(math.Inf(-1)))
	rec := b.NewRecordBatch()
	defer rec.Release()
	var out bytes.Buffer
	if err := New(&out).Write(rec); err != nil {
		t.Fatal(err)
	}
	want := `{"l":[NaN,Infinity,1.0],"st":{"x":NaN,"s":"\u003ca\u003e"},"m":[{"key":"k","value":-Infinity}]}` + "\n"
	if out.String() != want {
		t.Fatalf("wrote %s want %s", out.String(), want)
	}
}
