package houserules

import (
	"bytes"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/stratadb/strata"

// layers gives every package of the module its layer; a package may import
// (outside its tests) only packages of lower layers, so every import runs
// down. A package takes the layer of the longest entry that is its path or
// a folder above it; a package without one fails the test until it is
// given a place here.
//
// From the bottom: helpers that import nothing of Strata; the storage
// boundary; a table's schemas and their evolution, its objects in the
// store, the filter language and Parquet fragments, then the reads of a
// table (package table); the helpers that work on tables; the commit loop;
// shards; the Iceberg view; compaction; the HTTP server and client; then
// the harnesses (tests, simulation, benchmark), which may use everything
// of the engine and nothing of the programs; the programs' packages; the
// programs; the end-to-end tests.
var layers = map[string]int{
	"internal/backoff":   0,
	"internal/buildinfo": 0,
	"internal/cli":       0,
	"internal/ipcguard":  0,
	"internal/jsonrows":  0,
	"internal/plant":     0,
	"internal/sibling":   0,
	"api":                0,

	"blob":       1,
	"blob/fault": 2,
	"blob/gcs":   2,
	"blob/trace": 2,

	"table/value":    3,
	"table/evolve":   4,
	"table/format":   5,
	"table/expr":     6,
	"table/fragment": 6,
	"table":          7,
	"table/changes":  8,

	"internal/ingest":    8,
	"internal/telemetry": 8,

	"commit":              9,
	"walshard/wal":        10,
	"walshard/fleetmerge": 11,
	"walshard":            12,
	"lakehouse/layout":    13,
	"lakehouse":           14,
	"compactor":           14,
	"engine":              15,
	"engine/iceberg":      16,
	"internal/policyflag": 16,
	"client":              15,
	"job":                 16,
	"server":              17,

	"harness/latencyproxy": 20,
	"harness/rollouts":     20,
	"harness/testenv":      20,
	"harness/testcert":     20,
	"harness/blobtest":     21,
	"harness/bench":        21,
	"harness/houserules":   21,
	"harness/roundtrip":    21,
	"harness/sim":          21,

	"harness/latencyproxy/cmd": 22,

	"cmd/strata/command":            30,
	"cmd/strata-compactor/jobcmd":   30,
	"cmd/strata-iceberg/icebergcmd": 31,
	"cmd/strata/servecmd":           31,
	"cmd/strata":                    31,
	"cmd/strata-engine":             31,
	"cmd/strata-full":               32,
	"cmd/strata-iceberg":            32,
	"cmd/strata-compactor":          31,
	"cmd/strata-sim":                31,

	"e2e": 40,
}

// layerOf is the layer of a package path relative to the module, and the
// entry that gave it; ok is false when no entry covers it.
func layerOf(pkg string) (layer int, entry string, ok bool) {
	for p := pkg; ; {
		if l, ok := layers[p]; ok {
			return l, p, true
		}
		i := strings.LastIndex(p, "/")
		if i < 0 {
			return 0, "", false
		}
		p = p[:i]
	}
}

// TestImportsRunDown lists every package of the module with its imports
// (go list, tests left out) and fails naming each import that does not
// run down the layers, and each package that has no layer.
func TestImportsRunDown(t *testing.T) {
	for _, p := range checkLayers(listImports(t)) {
		t.Error(p)
	}
}

// TestLayerCheckFindsAnImportUpwards: the check names an import that runs
// up, one that stays on its layer, and a package without a layer.
func TestLayerCheckFindsAnImportUpwards(t *testing.T) {
	got := checkLayers(map[string][]string{
		"table":                       {"blob", "internal/plant", "commit"},
		"server":                      {"client", "compactor", "job"},
		"client":                      {"api", "engine"},
		"harness/sim":                 {"walshard", "harness/rollouts"},
		"blob/fault":                  {"blob"},
		"newpkg":                      {"blob"},
		"cmd/strata":                  {"cmd/strata/command"},
		"walshard":                    {"harness/testenv"},
		"cmd/strata-compactor/jobcmd": {"cmd/strata-compactor"},
	})
	want := []string{
		"client (layer 15) imports engine (layer 15): imports must run down",
		"cmd/strata-compactor/jobcmd (layer 30) imports cmd/strata-compactor (layer 31): imports must run down",
		"newpkg has no layer: give it one in harness/houserules/layers_test.go",
		"table (layer 7) imports commit (layer 9): imports must run down",
		"walshard (layer 12) imports harness/testenv (layer 20): imports must run down",
	}
	if !slices.Equal(got, want) {
		t.Errorf("the check found\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// checkLayers returns, sorted, what breaks the layering in imports
// (package → the module's packages it imports, paths relative to the
// module).
func checkLayers(imports map[string][]string) []string {
	var out []string
	for pkg, imps := range imports {
		l, _, ok := layerOf(pkg)
		if !ok {
			out = append(out, pkg+" has no layer: give it one in harness/houserules/layers_test.go")
			continue
		}
		for _, imp := range imps {
			il, _, ok := layerOf(imp)
			if ok && il < l {
				continue
			}
			if ok {
				out = append(out, fmt.Sprintf("%s (layer %d) imports %s (layer %d): imports must run down", pkg, l, imp, il))
			}
		}
	}
	slices.Sort(out)
	return out
}

// listImports runs go list over the module: each package and the module's
// packages it imports outside its tests, paths relative to the module.
func listImports(t *testing.T) map[string][]string {
	t.Helper()
	cmd := exec.Command("go", "list", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`, "./...")
	cmd.Dir = moduleRoot(t)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	imports := map[string][]string{}
	for line := range strings.Lines(string(out)) {
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		pkg, ok := relative(fields[0])
		if !ok {
			t.Fatalf("go list named %s, outside the module", fields[0])
		}
		imports[pkg] = nil
		for _, imp := range fields[1:] {
			if rel, ok := relative(imp); ok {
				imports[pkg] = append(imports[pkg], rel)
			}
		}
	}
	if len(imports) < 10 {
		t.Fatalf("go list named %d packages: %q", len(imports), out)
	}
	return imports
}

// relative is a package path relative to the module, if it is the
// module's.
func relative(pkg string) (string, bool) {
	if rel, ok := strings.CutPrefix(pkg, module+"/"); ok {
		return rel, true
	}
	return "", false
}
