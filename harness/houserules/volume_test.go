package houserules

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// A volume test (TestVolume...) is skipped by the test command's run under
// the race detector and run by its run without it, which names the
// packages that have them (scripts/test.sh, volume="..."). A volume test in
// a package that list leaves out would run in neither: each must be named
// there, and the list may name no package without one.
func TestEveryVolumeTestRuns(t *testing.T) {
	root := moduleRoot(t)
	script, err := os.ReadFile(filepath.Join(root, "scripts", "test.sh"))
	if err != nil {
		t.Fatal(err)
	}
	listed, racedPkgs := scriptList(t, script, "volume"), scriptList(t, script, "raced")

	decl := regexp.MustCompile(`(?m)^func TestVolume\w*\(`)
	found := map[string]bool{}
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata") && path != root {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if decl.Match(b) {
			rel, _ := filepath.Rel(root, filepath.Dir(path))
			found[filepath.ToSlash(rel)] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for pkg := range found {
		if !slices.Contains(listed, pkg) {
			t.Errorf("%s has volume tests, which scripts/test.sh's volume list leaves out: they would never run", pkg)
		}
		if !slices.Contains(racedPkgs, pkg) {
			t.Errorf("%s has volume tests but is not raced: name them as its other tests", pkg)
		}
	}
	for _, pkg := range listed {
		if !found[pkg] {
			t.Errorf("scripts/test.sh's volume list names %s, which has no volume test", pkg)
		}
	}
}

// scriptList reads the packages a line name="..." of scripts/test.sh
// lists.
func scriptList(t *testing.T, script []byte, name string) []string {
	t.Helper()
	m := regexp.MustCompile(`(?m)^` + name + `="([^"]*)"$`).FindSubmatch(script)
	if m == nil {
		t.Fatalf(`scripts/test.sh has no line %s="..."`, name)
	}
	return strings.Fields(string(m[1]))
}
