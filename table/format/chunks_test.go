package format_test

import (
	"reflect"
	"testing"

	"github.com/stratadb/strata/table/format"
)

// A fragment's entry records its chunks' boundaries as a start and the
// distances between them; Spans gives back the chunks of the leaves
// asked for, in every row group, in the object's order, those close
// together (not past a mebibyte) in one span that serves each of their
// reads, and the footer's range. Boundaries out of order record nothing.
func TestChunkSpans(t *testing.T) {
	// Two row groups of three leaves: chunks of 100, 50 000, 10 bytes,
	// then of 2 MiB, 20, 30; the footer's 1 000 bytes end the object.
	starts := []int64{4, 104, 50104, 50114, 50114 + 2<<20, 50134 + 2<<20}
	end := int64(50164 + 2<<20)
	chunks := format.LayOut(starts, end)
	if !reflect.DeepEqual(chunks, []int64{4, 100, 50000, 10, 2 << 20, 20, 30}) {
		t.Fatalf("LayOut: %v", chunks)
	}
	f := format.Fragment{Bytes: end + 1000, Chunks: chunks, Footer: 1000}
	for _, c := range []struct {
		want  []int
		spans []format.Span
	}{
		{[]int{0}, []format.Span{{Off: 4, Len: 100, Reads: 1}, {Off: 50114, Len: 2 << 20, Reads: 1}}},
		// Leaf 2 then 0: asked for in the object's order; 10 bytes 50 000
		// past the first, leaf 2's chunk is read on its own.
		{[]int{2, 0}, []format.Span{{Off: 4, Len: 100, Reads: 1}, {Off: 50104, Len: 10, Reads: 1}, {Off: 50114, Len: 2 << 20, Reads: 1}, {Off: 50134 + 2<<20, Len: 30, Reads: 1}}},
		// Adjacent chunks join, unless the span would pass a mebibyte.
		{[]int{1, 2}, []format.Span{{Off: 104, Len: 50010, Reads: 2}, {Off: 50114 + 2<<20, Len: 50, Reads: 2}}},
		{[]int{0, 2}, []format.Span{{Off: 4, Len: 100, Reads: 1}, {Off: 50104, Len: 10, Reads: 1}, {Off: 50114, Len: 2 << 20, Reads: 1}, {Off: 50134 + 2<<20, Len: 30, Reads: 1}}},
	} {
		spans, footer, ok := f.Spans(c.want, 3)
		if !ok || footer != [2]int64{end, 1000} || !reflect.DeepEqual(spans, c.spans) {
			t.Errorf("Spans(%v): %v %v %v, want %v", c.want, spans, footer, ok, c.spans)
		}
	}
	// Joined within 32 KiB of each other: leaf 0 and 2 of a row group
	// whose middle chunk is small.
	g := format.Fragment{Bytes: 10000, Chunks: []int64{4, 100, 20, 30}, Footer: 500}
	if spans, _, ok := g.Spans([]int{0, 2}, 3); !ok || !reflect.DeepEqual(spans, []format.Span{{Off: 4, Len: 150, Reads: 2}}) {
		t.Errorf("close chunks: %v %v", spans, ok)
	}
	for name, bad := range map[string]format.Fragment{
		"no chunks":          {Bytes: 10000, Footer: 500},
		"no footer":          {Bytes: 10000, Chunks: []int64{4, 100, 20, 30}},
		"a footer too large": {Bytes: 10000, Chunks: []int64{4, 100, 20, 30}, Footer: 9999},
		"leaves that differ": {Bytes: 10000, Chunks: []int64{4, 100, 20, 30, 5}, Footer: 500},
		"into the footer":    {Bytes: 10000, Chunks: []int64{4, 100, 20, 9500}, Footer: 500},
		"before the magic":   {Bytes: 10000, Chunks: []int64{0, 100, 20, 30}, Footer: 500},
		"a negative chunk":   {Bytes: 10000, Chunks: []int64{4, 100, -20, 30}, Footer: 500},
		"overflowing":        {Bytes: 10000, Chunks: []int64{4, 1 << 62, 1 << 62, 1 << 62}, Footer: 500},
	} {
		if _, _, ok := bad.Spans([]int{0}, 3); ok {
			t.Errorf("%s: spans given", name)
		}
	}
	if _, _, ok := f.Spans([]int{3}, 3); ok {
		t.Errorf("a leaf past the schema's: spans given")
	}
	if format.LayOut([]int64{4, 4, 10}, 20) != nil || format.LayOut([]int64{4, 10}, 9) != nil || format.LayOut(nil, 9) != nil {
		t.Errorf("LayOut of boundaries out of order recorded them")
	}
	if format.LayOut(make([]int64, format.MaxLaidOutChunks+1), 1) != nil {
		t.Errorf("LayOut of too many chunks recorded them")
	}
}
