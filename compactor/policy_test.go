package compactor

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stratadb/strata/table/format"
)

func at(hour int) time.Time { return time.Date(2026, 11, 29, hour, 30, 0, 0, time.UTC) }

func manifestOf(rows ...int64) *format.Manifest {
	m := &format.Manifest{Version: 7}
	for i, r := range rows {
		m.Fragments = append(m.Fragments, format.Fragment{ID: uint64(i), Key: fmt.Sprint(i), Rows: r, Bytes: r * 100})
	}
	return m
}

func TestShouldCompact(t *testing.T) {
	wrap := Window{22, 6}
	day := Window{9, 17}
	cases := []struct {
		name  string
		m     *format.Manifest
		p     Policy
		now   time.Time
		want  bool
		cause string
	}{
		{"due when the small fragments reach the minimum", manifestOf(10, 10, 10), Policy{MinFragments: 3}, at(12), true, "3 small"},
		{"not due below the minimum", manifestOf(10, 10), Policy{MinFragments: 3}, at(12), false, "below min"},
		{"large fragments do not count", manifestOf(10, 2_000_000, 2_000_000), Policy{MinFragments: 2}, at(12), false, "1 small"},
		{"not due inside a quiet window", manifestOf(10, 10, 10), Policy{MinFragments: 3, QuietWindows: []Window{day}}, at(12), false, "quiet window"},
		{"due outside it", manifestOf(10, 10, 10), Policy{MinFragments: 3, QuietWindows: []Window{day}}, at(18), true, "small"},
		{"a wrapping window holds late at night", manifestOf(10, 10, 10), Policy{MinFragments: 3, QuietWindows: []Window{wrap}}, at(23), false, "quiet"},
		{"a wrapping window holds after midnight", manifestOf(10, 10, 10), Policy{MinFragments: 3, QuietWindows: []Window{wrap}}, at(2), false, "quiet"},
		{"a wrapping window ends at its end hour", manifestOf(10, 10, 10), Policy{MinFragments: 3, QuietWindows: []Window{wrap}}, at(6), true, "small"},
		{"a wrapping window is open in the afternoon", manifestOf(10, 10, 10), Policy{MinFragments: 3, QuietWindows: []Window{wrap}}, at(15), true, "small"},
		{"mostly deleted fragments make it due alone", func() *format.Manifest {
			m := manifestOf(100)
			m.Fragments[0].Deletion = &format.Deletion{Key: "d", Count: 50}
			return m
		}(), Policy{MinFragments: 10}, at(12), true, "deleted"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, why := ShouldCompact(c.m, c.p, c.now)
			if got != c.want || !strings.Contains(why, c.cause) {
				t.Fatalf("ShouldCompact = %v (%s), want %v (%s)", got, why, c.want, c.cause)
			}
		})
	}
}

func TestParseWindow(t *testing.T) {
	w, err := ParseWindow("22-6")
	if err != nil || w != (Window{22, 6}) {
		t.Fatalf("ParseWindow(22-6) = %v, %v", w, err)
	}
	for _, bad := range []string{"", "22", "25-3", "a-b", "-1-4"} {
		if _, err := ParseWindow(bad); err == nil {
			t.Errorf("ParseWindow(%q) accepted", bad)
		}
	}
}

func TestPlanBinsAdjacentSmallFragments(t *testing.T) {
	cases := []struct {
		name string
		rows []int64
		p    Policy
		want string
	}{
		{"all small fragments fold into one bin", []int64{10, 10, 10, 10}, Policy{TargetRows: 100}, "[[0 1 2 3]]"},
		{"the target splits bins", []int64{20, 20, 20, 20, 20, 20, 20, 20, 20, 20, 20}, Policy{TargetRows: 100}, "[[0 1 2 3 4] [5 6 7 8 9]]"},
		{"a fragment past a quarter of the target is not rewritten again", []int64{10, 30, 10, 10}, Policy{TargetRows: 100}, "[[2 3]]"},
		{"a large fragment separates runs", []int64{10, 10, 500, 10, 10}, Policy{TargetRows: 100}, "[[0 1] [3 4]]"},
		{"a lone small fragment is left alone", []int64{10, 500, 10}, Policy{TargetRows: 100}, "[]"},
		{"the per-run bound stops the plan", []int64{10, 10, 10, 10, 10, 10}, Policy{TargetRows: 100, MaxSourceFragments: 4}, "[[0 1 2 3]]"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			plan := PlanCompaction(manifestOf(c.rows...), c.p)
			var got [][]uint64
			for _, b := range plan.Bins {
				got = append(got, b.Fragments)
			}
			if s := fmt.Sprint(got); s != c.want && !(c.want == "[]" && len(got) == 0) {
				t.Fatalf("bins %s, want %s\n%s", s, c.want, plan)
			}
		})
	}
}

// The parts of a split compaction plan disjoint bins, which together are
// the whole table's bins; each part's per-run bound counts its own bins
// only; and a part's bins stay its own when another part's output has
// replaced some fragments, or new ones were appended.
func TestPartsPlanDisjointBinsThatMakeTheWhole(t *testing.T) {
	rows := make([]int64, 400)
	for i := range rows {
		rows[i] = int64(5 + i%7)
		if i%37 == 36 {
			rows[i] = 500 // a large fragment ends a run
		}
	}
	m := manifestOf(rows...)
	base := Policy{TargetRows: 100}
	whole := PlanCompaction(m, base)
	for _, of := range []int{2, 3, 4} {
		owner := map[uint64]int{}
		var bins []string
		for part := range of {
			p := base
			p.Part = Part{Index: part, Of: of}
			if err := p.Validate(); err != nil {
				t.Fatal(err)
			}
			plan := PlanCompaction(m, p)
			if len(plan.Bins) == 0 {
				t.Fatalf("part %d of %d has no bin of %d", part, of, len(whole.Bins))
			}
			for _, b := range plan.Bins {
				for _, id := range b.Fragments {
					if o, ok := owner[id]; ok {
						t.Fatalf("fragment %d is in the bins of parts %d and %d of %d", id, o, part, of)
					}
					owner[id] = part
				}
				bins = append(bins, fmt.Sprint(b.Fragments))
			}
			// The part's bound counts its own sources.
			pc := p
			pc.MaxSourceFragments = 10
			capped := PlanCompaction(m, pc)
			if n := capped.Sources(); n == 0 || n > 10 {
				t.Fatalf("part %d of %d, at most 10 sources: planned %d", part, of, n)
			}
			// Appended fragments and another part's output change no bin
			// of this part's.
			other := PlanCompaction(m, Policy{TargetRows: 100, Part: Part{Index: (part + 1) % of, Of: of}})
			replaced := map[uint64]bool{}
			for _, id := range other.Bins[0].Fragments {
				replaced[id] = true
			}
			later := &format.Manifest{Version: 8}
			for _, f := range m.Fragments {
				switch {
				case f.ID == other.Bins[0].Fragments[0]:
					later.Fragments = append(later.Fragments, format.Fragment{ID: 2000, Key: "out", Rows: 90, Bytes: 9000})
				case !replaced[f.ID]:
					later.Fragments = append(later.Fragments, f)
				}
			}
			for i := range 5 {
				later.Fragments = append(later.Fragments, format.Fragment{ID: uint64(1000 + i), Key: "new", Rows: 5, Bytes: 500})
			}
			again := PlanCompaction(later, p)
			for i, b := range plan.Bins {
				if i >= len(again.Bins) || fmt.Sprint(again.Bins[i].Fragments) != fmt.Sprint(b.Fragments) {
					if i == len(plan.Bins)-1 {
						break // the last bin may take the appended fragments
					}
					t.Fatalf("part %d of %d: bin %d was %v, with fragments appended it is %v", part, of, i, b.Fragments, again.Bins)
				}
			}
		}
		var all []string
		for _, b := range whole.Bins {
			all = append(all, fmt.Sprint(b.Fragments))
		}
		slices.Sort(all)
		slices.Sort(bins)
		if fmt.Sprint(all) != fmt.Sprint(bins) {
			t.Fatalf("%d parts planned %d bins, the whole table %d", of, len(bins), len(all))
		}
	}
	if err := (&Policy{Part: Part{Index: 2, Of: 2}}).Validate(); err == nil {
		t.Fatal("part 2 of 2 validated")
	}
}
