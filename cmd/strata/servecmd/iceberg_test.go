package servecmd

import (
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stratadb/strata/cmd/strata/command"
	"github.com/stratadb/strata/engine"
)

// strata export iceberg runs strata-iceberg with its arguments, passing
// on its output and exit status; without it, the error says how to get
// it. The strata binary links none of the Iceberg writer.
func TestExportIcebergRunsTheIcebergProgram(t *testing.T) {
	u := "file://" + t.TempDir() + "/t"
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", t.TempDir())
	code, out, errOut := run(t, nil, "export", "iceberg", u)
	if code != 1 || out != "" || !strings.Contains(errOut, "go install github.com/stratadb/strata/cmd/strata-iceberg@latest") {
		t.Fatalf("without strata-iceberg: exit %d\n%s%s", code, out, errOut)
	}

	bin := t.TempDir()
	build := exec.Command(goTool, "build", "-o", filepath.Join(bin, command.IcebergProgram), "../../strata-iceberg")
	if msg, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building strata-iceberg: %v\n%s", err, msg)
	}
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	if code, out, errOut := run(t, nil, "export", "iceberg", u, "--location", "s3://lake/t\n"); code != 2 || out != "" || !strings.Contains(errOut, "invalid options: Location") {
		t.Errorf("a bad --location: exit %d, want 2\n%s%s", code, out, errOut)
	}
	schema := filepath.Join(t.TempDir(), "schema.json")
	if err := os.WriteFile(schema, []byte(`{"fields": [{"name": "id", "type": "int64"}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, out, errOut := run(t, nil, "create", u, "--schema", schema); code != 0 {
		t.Fatalf("create: exit %d\n%s%s", code, out, errOut)
	}
	code, out, errOut = run(t, nil, "export", "iceberg", u)
	if want := u + "/_iceberg/metadata/v1.metadata.json\n"; code != 0 || out != want || !strings.Contains(errOut, "version 1 is current") {
		t.Fatalf("export: exit %d\nstdout %q, want %q\n%s", code, out, want, errOut)
	}

	// strata serve's catalog writes the view with the same program, with
	// the collection's policy; what it says when it fails is the error.
	export := icebergExporter(slog.New(slog.DiscardHandler))
	if err := export(t.Context(), nil, u, engine.GCPolicy{KeepVersions: 3, RetainFor: time.Hour}); err != nil {
		t.Fatalf("the catalog's export: %v", err)
	}
	if err := export(t.Context(), nil, "file://"+t.TempDir()+"/none", engine.GCPolicy{}); err == nil || !strings.Contains(err.Error(), "strata-iceberg: ") || !strings.Contains(err.Error(), "no table") {
		t.Fatalf("the catalog's export of no table: %v", err)
	}
	t.Setenv("PATH", t.TempDir())
	if err := export(t.Context(), nil, u, engine.GCPolicy{}); err == nil || !strings.Contains(err.Error(), "go install github.com/stratadb/strata/cmd/strata-iceberg@latest") {
		t.Fatalf("the catalog's export without strata-iceberg: %v", err)
	}
}
