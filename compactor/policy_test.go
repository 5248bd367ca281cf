package compactor

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stratadb/strata/table"
)

func at(hour int) time.Time { return time.Date(2026, 11, 29, hour, 30, 0, 0, time.UTC) }

func manifestOf(rows ...int64) *table.Manifest {
	m := &table.Manifest{Version: 7}
	for i, r := range rows {
		m.Fragments = append(m.Fragments, table.Fragment{ID: uint64(i), Key: fmt.Sprint(i), Rows: r, Bytes: r * 100})
	}
	return m
}

func TestShouldCompact(t *testing.T) {
	wrap := Window{22, 6}
	day := Window{9, 17}
	cases := []struct {
		name  string
		m     *table.Manifest
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
		{"mostly deleted fragments make it due alone", func() *table.Manifest {
			m := manifestOf(100)
			m.Fragments[0].Deletion = &table.Deletion{Key: "d", Count: 50}
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
