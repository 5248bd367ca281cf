package houserules

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// machinery are the engine's parts: a table's format helpers aside
// (package table, whose values every driver names), only the engine
// reaches them.
var machinery = []string{"commit", "walshard", "compactor", "lakehouse"}

// drivers are the packages that drive tables: the server, the Job, the
// Go client, every program's packages, and the benchmark the CLI runs.
// Outside their tests they reach a table only through the engine: none
// imports machinery, nor an internal helper that does.
var drivers = []string{"server", "job", "client", "cmd", "harness/bench"}

// under tells whether pkg is one of roots or under one.
func under(pkg string, roots []string) bool {
	return slices.ContainsFunc(roots, func(r string) bool { return pkg == r || strings.HasPrefix(pkg, r+"/") })
}

// TestDriversGoThroughTheEngine lists every package with its imports (go
// list, tests left out) and fails naming each driver that imports the
// engine's machinery, directly or through a package of internal/.
func TestDriversGoThroughTheEngine(t *testing.T) {
	for _, p := range checkDoors(listImports(t)) {
		t.Error(p)
	}
}

// TestDoorCheckFindsADriverAroundTheEngine: the check names a driver that
// imports machinery, and one that does through an internal helper; a
// driver importing the engine, and the engine importing machinery, pass.
func TestDoorCheckFindsADriverAroundTheEngine(t *testing.T) {
	got := checkDoors(map[string][]string{
		"server":              {"api", "engine", "walshard"},
		"cmd/strata/command":  {"engine", "internal/policyflag"},
		"internal/policyflag": {"compactor", "internal/cli"},
		"job":                 {"engine", "blob"},
		"engine":              {"commit", "walshard", "compactor", "lakehouse/layout"},
		"harness/sim":         {"walshard"},
	})
	want := []string{
		"cmd/strata/command imports internal/policyflag, which imports compactor: a driver reaches tables through the engine",
		"server imports walshard: a driver reaches tables through the engine",
	}
	if !slices.Equal(got, want) {
		t.Errorf("the check found\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// checkDoors returns, sorted, each import of a driver that goes around
// the engine (package → the module's packages it imports).
func checkDoors(imports map[string][]string) []string {
	var out []string
	for pkg, imps := range imports {
		if !under(pkg, drivers) {
			continue
		}
		for _, imp := range imps {
			switch {
			case under(imp, machinery):
				out = append(out, fmt.Sprintf("%s imports %s: a driver reaches tables through the engine", pkg, imp))
			case strings.HasPrefix(imp, "internal/"):
				for _, deep := range imports[imp] {
					if under(deep, machinery) {
						out = append(out, fmt.Sprintf("%s imports %s, which imports %s: a driver reaches tables through the engine", pkg, imp, deep))
					}
				}
			}
		}
	}
	slices.Sort(out)
	return out
}
