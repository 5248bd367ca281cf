package table

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// A lookup's reads cover every block it needs, in at most the runs
// allowed, ascending and disjoint; with blocks to spare, one run a block
// or a run of adjacent ones.
func TestReadRunsCoverTheBlocksNeeded(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 500 {
		set := map[int]bool{}
		for range r.IntN(300) {
			set[r.IntN(1000)] = true
		}
		var need []int
		for b := range set {
			need = append(need, b)
		}
		slices.Sort(need)
		max := 1 + r.IntN(70)
		runs := readRuns(need, max)
		if len(need) == 0 {
			if runs != nil {
				t.Fatalf("runs %v for no blocks", runs)
			}
			continue
		}
		if len(runs) > max {
			t.Fatalf("%d runs, at most %d allowed", len(runs), max)
		}
		for i, run := range runs {
			if run[0] > run[1] || i > 0 && run[0] <= runs[i-1][1] || !set[run[0]] || !set[run[1]] {
				t.Fatalf("runs %v out of order, or not starting and ending on a block needed", runs)
			}
		}
		for _, b := range need {
			if !slices.ContainsFunc(runs, func(run [2]int) bool { return run[0] <= b && b <= run[1] }) {
				t.Fatalf("block %d in no run of %v", b, runs)
			}
		}
		if gaps := countGaps(need); len(runs) < min(max, gaps+1) {
			t.Fatalf("%d runs for %d blocks with %d gaps, %d allowed", len(runs), len(need), gaps, max)
		}
	}
}

func countGaps(need []int) int {
	n := 0
	for i := 1; i < len(need); i++ {
		if need[i] > need[i-1]+1 {
			n++
		}
	}
	return n
}
