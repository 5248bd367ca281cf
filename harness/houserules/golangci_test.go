package houserules

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "write .golangci.yml from the layers")

// TestGolangciConfigHoldsTheLayers: .golangci.yml, for those who run
// golangci-lint, gives depguard the layers of layers_test.go, one rule
// per layer, as golangciConfig renders them for the module's packages.
// go test ./harness/houserules -run TestGolangciConfigHoldsTheLayers -update
// writes it anew.
func TestGolangciConfigHoldsTheLayers(t *testing.T) {
	pkgs := listImports(t)
	want := golangciConfig(slices.Sorted(func(yield func(string) bool) {
		for p := range pkgs {
			if !yield(p) {
				return
			}
		}
	}))
	path := filepath.Join(moduleRoot(t), ".golangci.yml")
	if *update {
		if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Errorf(".golangci.yml does not hold the layers of layers_test.go; run\n\tgo test ./harness/houserules -run TestGolangciConfigHoldsTheLayers -update\nwant:\n%s", want)
	}
}

const golangciHeader = `# golangci-lint configuration (version 2). Written by
#   go test ./harness/houserules -run TestGolangciConfigHoldsTheLayers -update
# from the layers in harness/houserules/layers_test.go; do not edit the
# rules by hand.
#
# CI does not build golangci-lint (see scripts/test.sh): the same layering
# is enforced there by TestImportsRunDown, go vet runs its
# testinggoroutine analyzer (t.Fatal and t.FailNow in a goroutine a test
# started), and staticcheck its SA2002 check of the same. This file gives
# the same checks to whoever runs golangci-lint.
version: "2"
linters:
  default: none
  enable:
    - depguard
    - govet
  settings:
    govet:
      enable:
        - testinggoroutine
    depguard:
      # One rule per layer: the non-test files of its packages may not
      # import a package of the module on their layer or above. Then the
      # drivers' rule: they import none of the engine's machinery.
      rules:
`

// golangciConfig renders .golangci.yml for the module's packages pkgs
// (paths relative to the module, sorted).
func golangciConfig(pkgs []string) string {
	byLayer := map[int][]string{}
	for _, p := range pkgs {
		if l, _, ok := layerOf(p); ok {
			byLayer[l] = append(byLayer[l], p)
		}
	}
	var b strings.Builder
	b.WriteString(golangciHeader)
	for _, l := range slices.Sorted(func(yield func(int) bool) {
		for l := range byLayer {
			if !yield(l) {
				return
			}
		}
	}) {
		fmt.Fprintf(&b, "        layer-%02d:\n          files:\n", l)
		for _, p := range byLayer[l] {
			fmt.Fprintf(&b, "            - \"**/%s/*.go\"\n", p)
		}
		b.WriteString("            - \"!$test\"\n          deny:\n")
		for _, d := range denied(pkgs, l) {
			fmt.Fprintf(&b, "            - pkg: %q\n              desc: on layer %d or above; imports run down (harness/houserules/layers_test.go)\n", d, l)
		}
	}
	// The drivers' rule (doors_test.go): the engine is their one way in.
	b.WriteString("        drivers:\n          files:\n")
	for _, d := range drivers {
		fmt.Fprintf(&b, "            - \"**/%s/**/*.go\"\n", d)
	}
	b.WriteString("            - \"!$test\"\n          deny:\n")
	for _, m := range machinery {
		fmt.Fprintf(&b, "            - pkg: %q\n              desc: the engine's machinery; a driver reaches tables through the engine (harness/houserules/doors_test.go)\n", module+"/"+m)
	}
	return b.String()
}

// denied lists what a package of layer l may not import, as depguard
// reads it: a top folder whose packages are all on layer l or above as a
// prefix, else each such package exactly ("$").
func denied(pkgs []string, l int) []string {
	var out []string
	tops := map[string]bool{}
	for _, p := range pkgs {
		top, _, _ := strings.Cut(p, "/")
		tops[top] = true
	}
	for _, top := range slices.Sorted(func(yield func(string) bool) {
		for t := range tops {
			if !yield(t) {
				return
			}
		}
	}) {
		var under, above []string
		for _, p := range pkgs {
			if p == top || strings.HasPrefix(p, top+"/") {
				under = append(under, p)
				if pl, _, ok := layerOf(p); ok && pl >= l {
					above = append(above, p)
				}
			}
		}
		if len(above) == len(under) {
			out = append(out, module+"/"+top)
			continue
		}
		for _, p := range above {
			out = append(out, module+"/"+p+"$")
		}
	}
	return out
}
