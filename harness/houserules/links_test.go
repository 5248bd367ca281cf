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
//
// strata-engine, which the strata front runs for the table verbs, links
// neither the server (its Prometheus metrics, its Iceberg catalog) nor the
// GCS driver (its client and gRPC stack): strata-full carries those, for serve,
// token and gs:// URLs. No program but strata-iceberg and the Job's links
// iceberg-go at all: lakehouse/layout reads the manifest lists' Avro
// itself.
var unlinked = map[string][]string{
	"cmd/strata-engine": {"github.com/apache/iceberg-go/...", module + "/lakehouse", module + "/engine/iceberg",
		module + "/server", module + "/blob/gcs", "github.com/prometheus/...", "cloud.google.com/..."},
	"cmd/strata-full": {"github.com/apache/iceberg-go/table/...", module + "/lakehouse", module + "/engine/iceberg"},
}

// TestTheFrontLinksTheStandardLibraryAlone: the strata front, which
// answers version and help and runs the verbs' programs, links nothing
// but the standard library and two small packages of its own, so that it
// starts in a few milliseconds.
func TestTheFrontLinksLittleButTheStandardLibrary(t *testing.T) {
	cmd := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", "./cmd/strata")
	cmd.Dir = moduleRoot(t)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -deps ./cmd/strata: %v", err)
	}
	allowed := map[string]bool{module + "/cmd/strata": true, module + "/internal/buildinfo": true, module + "/internal/sibling": true}
	for dep := range strings.Lines(string(out)) {
		if dep = strings.TrimSpace(dep); dep != "" && !allowed[dep] {
			t.Errorf("the strata front links %s: it may link the standard library, internal/buildinfo and internal/sibling alone", dep)
		}
	}
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
