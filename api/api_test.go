package api

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestJSONNamesAreLowercase: every field of every wire type has a json tag
// whose name is lowercase with underscores, so no Go field name ever leaks
// onto the wire.
func TestJSONNamesAreLowercase(t *testing.T) {
	fset := token.NewFileSet()
	names, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	var files []*ast.File
	for _, n := range names {
		if strings.HasSuffix(n, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, n, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	name := regexp.MustCompile(`^[a-z][a-z0-9_]*$`)
	fields := 0
	for _, file := range files {
		ast.Inspect(file, func(n ast.Node) bool {
			ts, ok := n.(*ast.TypeSpec)
			if !ok || !ts.Name.IsExported() {
				return true
			}
			st, ok := ts.Type.(*ast.StructType)
			if !ok {
				return true
			}
			for _, f := range st.Fields.List {
				fields++
				where := ts.Name.Name
				if len(f.Names) > 0 {
					where += "." + f.Names[0].Name
				}
				if f.Tag == nil {
					t.Errorf("%s: no json tag", where)
					continue
				}
				tag, _ := strconv.Unquote(f.Tag.Value)
				j, _, _ := strings.Cut(reflect.StructTag(tag).Get("json"), ",")
				if !name.MatchString(j) {
					t.Errorf("%s: json name %q is not lowercase", where, j)
				}
			}
			return true
		})
	}
	if fields < 50 {
		t.Fatalf("found %d fields: the parse missed the wire types", fields)
	}
}

// TestClientLinksNoEngine: a program that only talks to a server links
// package api, Arrow, the standard library, the retry helper and the
// Arrow IPC guard (internal/backoff and internal/ipcguard, standard library
// only) — no engine package and no object-store SDK.
func TestClientLinksNoEngine(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "../client").Output()
	if err != nil {
		t.Fatal(err)
	}
	deps := strings.Fields(string(out))
	for _, d := range deps {
		switch {
		case strings.HasPrefix(d, "github.com/stratadb/strata/") && d != "github.com/stratadb/strata/api" && d != "github.com/stratadb/strata/client" &&
			d != "github.com/stratadb/strata/internal/backoff" && d != "github.com/stratadb/strata/internal/ipcguard":
			t.Errorf("the client links the engine package %s", d)
		case strings.Contains(d, "aws") || strings.Contains(d, "cloud.google.com") || strings.Contains(d, "gocloud.dev") || strings.Contains(d, "minio"):
			t.Errorf("the client links the store SDK package %s", d)
		}
	}
	t.Logf("the client links %d packages", len(deps))
}
