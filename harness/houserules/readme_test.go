package houserules

import (
	"bytes"
	"errors"
	"fmt"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// readmeImports are the packages README.md's Go examples use, by name.
var readmeImports = map[string]string{
	"context": "context",
	"time":    "time",
	"arrow":   "github.com/apache/arrow-go/v18/arrow",
	"api":     module + "/api",
	"blob":    module + "/blob",
	"client":  module + "/client",
	"engine":  module + "/engine",
	"table":   module + "/table",
	"expr":    module + "/table/expr",
	"format":  module + "/table/format",
	"value":   module + "/table/value",
}

// readmeGoBlocks returns README.md's ```go blocks, each with the line it
// starts on.
func readmeGoBlocks(t *testing.T) (blocks []string, lines []int) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(moduleRoot(t), "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	var cur *strings.Builder
	for i, line := range strings.Split(string(data), "\n") {
		switch {
		case cur == nil && line == "```go":
			cur = &strings.Builder{}
			lines = append(lines, i+2)
		case cur != nil && line == "```":
			blocks = append(blocks, cur.String())
			cur = nil
		case cur != nil:
			cur.WriteString(line + "\n")
		}
	}
	return blocks, lines
}

// Every Go example of README.md type-checks against the module as it is:
// each block, as the body of a function that has ctx, b, schema, batch and
// a handle db at hand, names only what exists, with the arguments it
// takes, and reaches tables through the engine alone (the engine's
// machinery is not among the packages it may name). ("…" in a
// block stands for code left out.) Unused variables are not errors here:
// an example shows a call, not what is done with its answer.
func TestREADMEGoExamplesTypeCheck(t *testing.T) {
	blocks, at := readmeGoBlocks(t)
	if len(blocks) == 0 {
		t.Fatal("README.md has no ```go block")
	}
	imp := exportImporter(t, readmeImports)
	for i, body := range blocks {
		var src bytes.Buffer
		src.WriteString("package readme\n\nimport (\n")
		for name, path := range readmeImports {
			fmt.Fprintf(&src, "\t%s %q\n", name, path)
		}
		src.WriteString(")\n\nvar (\n\tctx    context.Context\n\tb      blob.Bucket\n\tschema *arrow.Schema\n\tbatch  arrow.RecordBatch\n\tdb     *engine.DB\n\t_      = time.Second\n\t_      api.TakeRequest\n\t_      client.Options\n\t_      engine.Options\n\t_      table.ScanOptions\n)\n\nfunc _() {\n")
		src.WriteString(strings.ReplaceAll(body, "…", ""))
		src.WriteString("}\n")
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, "README.md", src.Bytes(), parser.SkipObjectResolution)
		if err != nil {
			t.Errorf("README.md's Go example at line %d does not parse: %v", at[i], err)
			continue
		}
		var hard []error
		conf := types.Config{Importer: imp, Error: func(err error) {
			if te, ok := err.(types.Error); !ok || !te.Soft {
				hard = append(hard, err)
			}
		}}
		_, _ = conf.Check("readme", fset, []*ast.File{f}, nil)
		if len(hard) > 0 {
			t.Errorf("README.md's Go example at line %d does not type-check against the module:\n%v\n%s", at[i], errors.Join(hard...), body)
		}
	}
}

// exportImporter imports pkgs, and what they import, from the export data
// the go command builds (go list -export), as the compiler would.
func exportImporter(t *testing.T, pkgs map[string]string) types.Importer {
	t.Helper()
	args := []string{"list", "-export", "-deps", "-f", "{{.ImportPath}}={{.Export}}"}
	for _, p := range pkgs {
		args = append(args, p)
	}
	cmd := exec.Command("go", args...)
	cmd.Dir = moduleRoot(t)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -export: %v\n%s", err, stderr.String())
	}
	exports := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if path, file, ok := strings.Cut(line, "="); ok && file != "" {
			exports[path] = file
		}
	}
	return importer.ForCompiler(token.NewFileSet(), "gc", func(path string) (io.ReadCloser, error) {
		file, ok := exports[path]
		if !ok {
			return nil, fmt.Errorf("no export data for %s", path)
		}
		return os.Open(file)
	})
}
