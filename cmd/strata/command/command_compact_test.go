package command

import (
	"strings"
	"testing"
)

// Issue 36, as an operator met it: three worker runs, a compaction into
// one fragment of two row groups, a delete in it, two small appends. Every
// compaction after that must succeed (it used to fail for good with
// "encoded 2 row groups, not one"), and no row may be lost.
func TestCompactionAfterADeleteInALargeCompactedFragment(t *testing.T) {
	u := "file://" + t.TempDir() + "/t"
	must := func(args ...string) string {
		t.Helper()
		code, out, errOut := run(t, nil, args...)
		if code != 0 {
			t.Fatalf("strata %s: exit %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), code, out, errOut)
		}
		return out
	}
	for range 3 {
		must("worker", u, "--worker", "1", "--appends", "7", "--rows", "1000")
	}
	must("compact", u)
	if out := must("delete", u, "--filter", "id < 1000000100"); !strings.Contains(out, "deleted 100 rows") {
		t.Fatalf("delete: %s", out)
	}
	for range 2 {
		must("worker", u, "--worker", "2", "--appends", "1", "--rows", "10")
	}
	if out := must("compact", u); !strings.Contains(out, "3 -> 1") {
		t.Fatalf("compaction after the delete: %s", out)
	}
	must("compact", u) // and the next pass, with nothing left to do
	if out := must("stats", u); !strings.Contains(out, "20920") {
		t.Fatalf("after the compactions:\n%s", out)
	}
}
