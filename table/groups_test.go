package table_test

import (
	"testing"
	"time"

	"github.com/stratadb/strata/table"
)

// Rebalance gives every partition to a live member, each member its share
// within one of the others', and moves only what it must: a joining
// member takes its share from the others, a lapsed member's partitions
// alone go to the rest.
func TestRebalanceMovesFewPartitions(t *testing.T) {
	now := time.Now()
	g := &table.Group{Partitions: 64, Members: map[string]time.Time{}, Positions: make([]uint64, 64)}
	check := func(members ...string) {
		t.Helper()
		count := map[string]int{}
		for p := range 64 {
			count[g.Owner(p, now)]++
		}
		lo, hi := 64, 0
		for _, m := range members {
			lo, hi = min(lo, count[m]), max(hi, count[m])
		}
		if count[""] != 0 || len(count) != len(members) || hi-lo > 1 {
			t.Fatalf("members %v: partitions %v", members, count)
		}
	}
	moved := func(before []string) int {
		n := 0
		for p, o := range g.Owners {
			if before[p] != o {
				n++
			}
		}
		return n
	}
	join := func(m string) []string {
		before := append([]string(nil), g.Owners...)
		g.Members[m] = now.Add(time.Minute)
		g.Rebalance(now)
		return before
	}
	join("a")
	check("a")
	join("b")
	check("a", "b")
	if n := moved(join("c")); n != 21 {
		t.Errorf("c joining moved %d partitions, want its 21", n)
	}
	check("a", "b", "c")
	if n := moved(join("d")); n != 16 {
		t.Errorf("d joining moved %d partitions, want its 16", n)
	}
	check("a", "b", "c", "d")
	before := append([]string(nil), g.Owners...)
	g.Members["b"] = now.Add(-time.Second) // lapsed
	had := 0
	for _, o := range before {
		if o == "b" {
			had++
		}
	}
	g.Rebalance(now)
	if n := moved(before); n != had {
		t.Errorf("b lapsing moved %d partitions, want its %d", n, had)
	}
	check("a", "c", "d")
	if len(g.Owned("b", now)) != 0 || len(g.Owned("a", now)) < 21 {
		t.Errorf("owned: b %v, a %v", g.Owned("b", now), g.Owned("a", now))
	}
}
