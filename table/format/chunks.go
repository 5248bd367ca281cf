package format

import "slices"

// MaxLaidOutChunks bounds the column chunks whose offsets a fragment's
// entry records (Fragment.Chunks): a fragment of many row groups is read
// a row group at a time, where one more round trip for its footer costs
// little, and its entry stays small.
const MaxLaidOutChunks = 256

// LayOut returns the Chunks a fragment's entry records for column chunks
// that start at starts (in the object's order) and end at end, or nil when
// there are none or more than MaxLaidOutChunks, or when they do not lie
// in order.
func LayOut(starts []int64, end int64) []int64 {
	if len(starts) == 0 || len(starts) > MaxLaidOutChunks {
		return nil
	}
	out := make([]int64, 0, len(starts)+1)
	out = append(out, starts[0])
	prev := starts[0]
	for _, at := range append(starts[1:len(starts):len(starts)], end) {
		if at <= prev {
			return nil
		}
		out = append(out, at-prev)
		prev = at
	}
	return out
}

// Span is a range of an object read in one request, which serves Reads
// reads of the column chunks within it.
type Span struct {
	Off, Len int64
	Reads    int
}

// joinGap is the most bytes between two chunks that one request reads
// rather than making two: at a remote store's tens of megabytes a second,
// far less time than a round trip. Chunks are joined into spans of at
// most joinMax bytes: larger ones arrive sooner as requests of their own,
// in flight together.
const (
	joinGap = 32 << 10
	joinMax = 1 << 20
)

// Spans returns the spans of f's object that hold the chunks of the given
// leaves — of leaves in all, the leaves of the stored schema f was
// written under — in every row group, close ones joined, and the range
// (offset, length) of its footer; ok is false when f records no layout
// (Chunks, Footer), or none that fits an object of f's size and that many
// leaves. The spans are where the bytes should be: the reader checks them
// against the footer.
func (f *Fragment) Spans(want []int, leaves int) (spans []Span, footer [2]int64, ok bool) {
	n := len(f.Chunks) - 1
	if n < 1 || n > MaxLaidOutChunks || leaves < 1 || n%leaves != 0 || f.Footer < 12 || f.Footer > f.Bytes-4 {
		return nil, footer, false
	}
	footer = [2]int64{f.Bytes - f.Footer, f.Footer}
	bounds := make([]int64, len(f.Chunks))
	bounds[0] = f.Chunks[0]
	if bounds[0] < 4 || bounds[0] > footer[0] {
		return nil, footer, false
	}
	for i := 1; i < len(f.Chunks); i++ {
		if f.Chunks[i] <= 0 || f.Chunks[i] > footer[0]-bounds[i-1] {
			return nil, footer, false
		}
		bounds[i] = bounds[i-1] + f.Chunks[i]
	}
	want = slices.Compact(slices.Sorted(slices.Values(want)))
	for rg := range n / leaves {
		for _, leaf := range want {
			if leaf < 0 || leaf >= leaves {
				return nil, footer, false
			}
			i := rg*leaves + leaf
			start, end := bounds[i], bounds[i+1]
			if k := len(spans) - 1; k >= 0 && start >= spans[k].Off+spans[k].Len && start-(spans[k].Off+spans[k].Len) <= joinGap && end-spans[k].Off <= joinMax {
				spans[k].Len = end - spans[k].Off
				spans[k].Reads++
				continue
			}
			spans = append(spans, Span{Off: start, Len: end - start, Reads: 1})
		}
	}
	return spans, footer, true
}
