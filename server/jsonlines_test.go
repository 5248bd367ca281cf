package server

import (
	"bytes"
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

// Rows written as JSON lines are the bytes Arrow's own encoder writes —
// keys sorted, HTML escaped, every type — while a string or binary value
// of megabytes is written in pieces, never whole.
func TestJSONLinesAreArrowsWithLargeValuesInPieces(t *testing.T) {
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
	if err := (&jsonLines{w: &got}).write(rec); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.Bytes(), want.Bytes()) {
		g, w := got.Bytes(), want.Bytes()
		at := 0
		for at < min(len(g), len(w)) && g[at] == w[at] {
			at++
		}
		t.Fatalf("JSON lines differ from Arrow's at byte %d of %d/%d: %q against %q", at, len(g), len(w),
			g[at:min(len(g), at+40)], w[at:min(len(w), at+40)])
	}
	if got.largest > 1<<20 {
		t.Fatalf("a write of %d bytes: a value of %d bytes was encoded whole", got.largest, 3<<20)
	}
}
