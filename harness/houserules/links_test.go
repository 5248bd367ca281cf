package houserules

import (
	"bytes"
	"os/exec"
	"strings"
	"testing"
)

// unlinked names, per program, the packages it must not link (a name
// ending in "/..." with every package under it): what only another
// program uses and costs every start of this one. The Iceberg writer
// (iceberg-go's table packages, whose expression library initialises for
// about 200 ms and 30 MB) is linked by strata-iceberg, which strata runs
// for `strata export iceberg`, and by the compactor Job's program, which
// keeps the view every pass; strata reads what the view holds on to with
// lakehouse/layout alone.
var unlinked = map[string][]string{
	"cmd/strata": {"github.com/apache/iceberg-go/table/...", module + "/lakehouse", module + "/engine/iceberg"},
}

// TestProgramsLinkOnlyWhatTheyUse lists each program's dependencies (go
// list -deps) and fails naming every package it must not link.
func TestProgramsLinkOnlyWhatTheyUse(t *testing.T) {
	for prog, banned := range unlinked {
		cmd := exec.Command("go", "list", "-deps", "./"+prog)
		cmd.Dir = moduleRoot(t)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("go list -deps ./%s: %v\n%s", prog, err, stderr.String())
		}
		for dep := range strings.Lines(string(out)) {
			dep = strings.TrimSpace(dep)
			for _, b := range banned {
				if tree, ok := strings.CutSuffix(b, "/..."); dep == b || ok && (dep == tree || strings.HasPrefix(dep, tree+"/")) {
					t.Errorf("%s links %s (of %s): only the programs that use it may", prog, dep, b)
					break
				}
			}
		}
	}
}
