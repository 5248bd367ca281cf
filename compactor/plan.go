package compactor

import (
	"fmt"
	"strings"

	"github.com/stratadb/strata/table/format"
)

// Bin is a run of adjacent fragments to rewrite into one.
type Bin struct {
	Fragments []uint64
	Rows      int64 // live rows
	Bytes     int64
}

// Plan is what one compaction run will do. It is a plain value: print it
// for a dry run.
type Plan struct {
	Version uint64 // the table version planned against
	Bins    []Bin
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
		fmt.Fprintf(&sb, "  bin %d: %d fragments %s → 1 fragment, %d rows, %d bytes\n", i, len(b.Fragments), ids, b.Rows, b.Bytes)
	}
	return sb.String()
}

// PlanCompaction bins adjacent small fragments (in manifest order) up to
// the target rows and bytes, within the per-run bounds. A bin of one
// fragment is kept only when that fragment is mostly deleted rows, or, in
// a table with a cluster key, not sorted by it. With
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
		if len(cur.Fragments) > 0 && (cur.Rows+f.LiveRows() > p.TargetRows || cur.Bytes+f.Bytes > p.TargetBytes) {
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
