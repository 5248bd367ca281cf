package e2e

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stratadb/strata/harness/testenv"
)

// Both binaries, built from a checkout as a release is, name the module
// version and the revision they were built from.
func TestBinariesNameTheirVersionAndRevision(t *testing.T) {
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	head, err := exec.Command("git", "-C", root, "rev-parse", "HEAD").Output()
	if err != nil {
		t.Skipf("not a git checkout: %v", err)
	}
	rev := strings.TrimSpace(string(head))
	for _, c := range [][]string{{"strata", "version"}, {"strata-compactor", "--version"}} {
		out, err := exec.Command(filepath.Join(bins, c[0]), c[1:]...).CombinedOutput()
		line := string(out)
		if err != nil || !strings.HasPrefix(line, c[0]+" v") || !strings.Contains(line, "(revision "+rev) || strings.Contains(line, "(devel)") {
			t.Fatalf("%s: %v\n%s (HEAD is %s)", strings.Join(c, " "), err, line, rev)
		}
	}
}
