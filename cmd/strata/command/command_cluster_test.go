package command

import (
	"slices"
	"strings"
	"testing"
)

// An operator clusters a table by a column: alter says so, compaction
// sorts the fragments, stats counts them sorted, and a filter on the
// column reads the rows it did before. Bad keys are usage errors that
// commit nothing.
func TestAlterClusterByThenCompact(t *testing.T) {
	u := "file://" + t.TempDir() + "/t"
	must := func(args ...string) string {
		t.Helper()
		code, out, errOut := run(t, nil, args...)
		if code != 0 {
			t.Fatalf("strata %s: exit %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), code, out, errOut)
		}
		return out
	}
	for range 2 {
		must("worker", u, "--worker", "1", "--appends", "3", "--rows", "200")
	}
	before := must("scan", u, "--columns", "id", "--filter", "reward < 0.05", "--format", "csv")
	for _, bad := range [][]string{
		{"--cluster-by", "nope"},
		{"--cluster-by", "reward,"},
		{"--cluster-by", "reward", "--no-cluster"},
		{"--cluster-by", "reward,reward"},
		{"--cluster-by", "reward", "--cluster-by", "step"},
		{},
	} {
		if code, _, errOut := run(t, nil, append([]string{"alter", u}, bad...)...); code != 2 || errOut == "" {
			t.Errorf("alter %v: exit %d (%s), want a usage error", bad, code, errOut)
		}
	}
	if out := must("alter", u, "--cluster-by", "reward"); !strings.Contains(out, "altered: cluster by reward") {
		t.Fatalf("alter: %s", out)
	}
	// The key it has: nothing to commit.
	if out := must("alter", u, "--cluster-by", "reward"); !strings.Contains(out, "unchanged") {
		t.Fatalf("alter to the same key: %s", out)
	}
	if out := must("stats", u); !strings.Contains(out, "cluster by") || !strings.Contains(out, " reward (0 of 6 fragments sorted)") {
		t.Fatalf("stats before compacting:\n%s", out)
	}
	if out := must("stats", u, "--json"); !strings.Contains(out, `"cluster_by": [`) || !strings.Contains(out, `"sorted_fragments": 0`) {
		t.Fatalf("stats --json before compacting:\n%s", out)
	}
	must("compact", u)
	if out := must("stats", u); !strings.Contains(out, "cluster by") || !strings.Contains(out, " reward (1 of 1 fragments sorted)") {
		t.Fatalf("stats after compacting:\n%s", out)
	}
	after := must("scan", u, "--columns", "id", "--filter", "reward < 0.05", "--format", "csv")
	if sorted(before) != sorted(after) || strings.Count(after, "\n") < 10 {
		t.Fatalf("the filter read other rows after clustering:\n%s\nbefore:\n%s", after, before)
	}
	if out := must("alter", u, "--no-cluster"); !strings.Contains(out, "altered: cluster by nothing") {
		t.Fatalf("alter --no-cluster: %s", out)
	}
	if out := must("stats", u); strings.Contains(out, "cluster by") {
		t.Fatalf("stats after the key is cleared:\n%s", out)
	}
	if out := must("alter", u, "--no-cluster"); !strings.Contains(out, "unchanged") {
		t.Fatalf("--no-cluster on a table without a key: %s", out)
	}
}

// sorted returns the lines of s in order.
func sorted(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}
