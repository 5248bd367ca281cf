package compactor

import (
	"fmt"
	"strings"

	"github.com/stratadb/strata/table/format"
)

// Bin is a run of adjacent fragments to rewrite into one, or, sorted by
// the table's cluster key, into fragments of the target size.
type Bin struct {
	Fragments []uint64
	Rows      int64 // live rows
	Bytes     int64
	// Sorted: the bin is sorted by the cluster key; Outputs is then about
	// the fragments its rows make at the target rows and bytes (a bin of
	// no live rows makes none), else 1.
	Sorted  bool
	Outputs int
}

// Plan is what one compaction run will do. It is a plain value: print it
// for a dry run.
type Plan struct {
	Version uint64 // the table version planned against
	Bins    []Bin
}

// Outputs is the number of fragments the plan writes (see Bin.Outputs).
func (p Plan) Outputs() int {
	n := 0
	for _, b := range p.Bins {
		n += b.Outputs
	}
	return n
}

// Sources is the number of fragments the plan rewrites.
func (p Plan) Sources() int {
	n := 0
	for _, b := range p.Bins {
		n += len(b.Fragments)
	}
	return n
}

func (p Plan) String() string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "plan against v%d: %d bins, %d source fragments\n", p.Version, len(p.Bins), p.Sources())
	for i, b := range p.Bins {
		ids := fmt.Sprint(b.Fragments)
		if n := len(b.Fragments); n > 8 {
			ids = fmt.Sprintf("[%d %d %d … %d]", b.Fragments[0], b.Fragments[1], b.Fragments[2], b.Fragments[n-1])
		}
		out := "1 fragment"
		if b.Sorted {
			out = fmt.Sprintf("%d fragments sorted by the cluster key", b.Outputs)
		}
		fmt.Fprintf(&sb, "  bin %d: %d fragments %s → %s, %d rows, %d bytes\n", i, len(b.Fragments), ids, out, b.Rows, b.Bytes)
	}
	return sb.String()
}

// PlanCompaction bins adjacent small fragments (in manifest order) up to
// the target rows and bytes, within the per-run bounds. A bin of one
// fragment is kept only when that fragment is mostly deleted rows, or, in
// a table with a cluster key, not sorted by it. In such a table a bin is
// bounded by the per-run bounds alone: its rows are sorted as a whole and
// written in fragments of the target size, each holding the keys after
// the one before. With
// p.Part, only the part's bins are kept, and only they count toward the
// bounds.
func PlanCompaction(m *format.Manifest, p Policy) Plan {
	p = p.withDefaults()
	plan := Plan{Version: m.Version}
	key := clusterOf(m)
	var cur Bin
	sources, bytes := 0, int64(0)
	flush := func() {
		// Another part's bin is left to it, and counts nothing here.
		if len(cur.Fragments) > 0 && !p.Part.owns(cur.Fragments[0]) {
			cur = Bin{}
			return
		}
		if len(cur.Fragments) > 1 || (len(cur.Fragments) == 1 && p.rewritesAlone(m.Fragment(cur.Fragments[0]), key)) {
			cur.Sorted, cur.Outputs = key != nil, 1
			if cur.Sorted {
				cur.Outputs = int(max((cur.Rows+p.TargetRows-1)/p.TargetRows, (cur.Bytes+p.TargetBytes-1)/p.TargetBytes, 1))
			}
			plan.Bins = append(plan.Bins, cur)
			sources += len(cur.Fragments)
			bytes += cur.Bytes
		}
		cur = Bin{}
	}
	for i := range m.Fragments {
		f := &m.Fragments[i]
		if !p.rewrites(f, key) {
			flush() // a large fragment ends a run of adjacent small ones
			continue
		}
		// A table with a cluster key sorts a bin as a whole and splits it
		// at the target size: a bin of it is bounded by the run's bounds
		// alone, so that its fragments hold disjoint ranges of the key.
		if key == nil && len(cur.Fragments) > 0 && (cur.Rows+f.LiveRows() > p.TargetRows || cur.Bytes+f.Bytes > p.TargetBytes) {
			flush()
		}
		first := f.ID
		if len(cur.Fragments) > 0 {
			first = cur.Fragments[0]
		}
		if p.Part.owns(first) && (sources+len(cur.Fragments)+1 > p.MaxSourceFragments || bytes+cur.Bytes+f.Bytes > p.MaxSourceBytes) {
			break
		}
		cur.Fragments = append(cur.Fragments, f.ID)
		cur.Rows += f.LiveRows()
		cur.Bytes += f.Bytes
	}
	flush()
	return plan
}
