package table

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// A lookup's reads cover every block it needs, ascending and disjoint,
// each run ending on blocks it needs, and two runs only where the blocks
// between them are not near.
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
		gap := r.IntN(20)
		near := func(a, b int) bool { return b-a-1 <= gap }
		runs := readRuns(need, near)
		for i, run := range runs {
			if run[0] > run[1] || i > 0 && (run[0] <= runs[i-1][1] || near(runs[i-1][1], run[0])) || !set[run[0]] || !set[run[1]] {
				t.Fatalf("runs %v out of order, near, or not starting and ending on a block needed", runs)
			}
		}
		for _, b := range need {
			if !slices.ContainsFunc(runs, func(run [2]int) bool { return run[0] <= b && b <= run[1] }) {
				t.Fatalf("block %d in no run of %v", b, runs)
			}
		}
	}
}
