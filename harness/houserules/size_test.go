package houserules

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The house rules: no function over maxFuncLines lines, no file over
// maxFileLines, in every .go file of the module that is not a test.
const (
	maxFuncLines = 100
	maxFileLines = 600
)

// allowed lists the files and functions that may still break the rules,
// each with its size when it was listed: walshard/ and compactor/ only.
// An entry may not grow, and an entry that no longer breaks a rule must be
// removed, so the list only shrinks. Keys are "path" for a file and
// "path:Func" (or "path:Type.Method") for a function, paths relative to
// the module root. It is empty: every file and function keeps the rules.
var allowed = map[string]int{}

// allowedDirs are the only folders whose files may be in allowed.
var allowedDirs = []string{"walshard", "compactor"}

// TestFunctionsAndFilesAreShort parses every non-test .go file of the
// module and fails listing each function over 100 lines and each file over
// 600 that the allow-list does not hold at that size or less.
func TestFunctionsAndFilesAreShort(t *testing.T) {
	sizes, err := measure(moduleRoot(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range check(sizes) {
		t.Error(p)
	}
}

// TestAllowListIsForWalshardAndCompactorOnly: nothing outside the two
// folders may be excused.
func TestAllowListIsForWalshardAndCompactorOnly(t *testing.T) {
	for key := range allowed {
		path, _, _ := strings.Cut(key, ":")
		if !slices.Contains(allowedDirs, filepath.Dir(path)) {
			t.Errorf("%s is on the allow-list, which holds only files directly under %v", key, allowedDirs)
		}
	}
}

// TestCheckFindsLongFunctionsAndFiles: the check names what breaks a rule,
// holds the allow-list to its sizes, and asks for stale entries to go.
func TestCheckFindsLongFunctionsAndFiles(t *testing.T) {
	src := "package p\n\nfunc Short() {}\n\nfunc Long() {\n" + strings.Repeat("\t_ = 0\n", 99) + "}\n\ntype T struct{}\n\nfunc (T) M() {\n" + strings.Repeat("\t_ = 0\n", 99) + "}\n" + strings.Repeat("// filler\n", 400)
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "walshard"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"p.go", "walshard/w.go", "p_test.go"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	sizes, err := measure(dir)
	if err != nil {
		t.Fatal(err)
	}
	got := checkWith(sizes, map[string]int{"walshard/w.go": 700, "walshard/w.go:Long": 101, "walshard/w.go:T.M": 200, "walshard/gone.go": 650})
	want := []string{
		"p.go: 609 lines, over 600",
		"p.go:Long: 101 lines, over 100",
		"p.go:T.M: 101 lines, over 100",
		"walshard/gone.go: on the allow-list (650) but no longer over its limit: remove it from the list",
	}
	if !slices.Equal(got, want) {
		t.Errorf("check found\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	got = checkWith(sizes, map[string]int{"walshard/w.go": 608, "walshard/w.go:Long": 101, "walshard/w.go:T.M": 101})
	if !slices.Contains(got, "walshard/w.go: 609 lines, over 600 (the allow-list holds it at 608: it may only shrink)") {
		t.Errorf("an allow-listed file that grew was not named: %q", got)
	}
}

// measure returns the length in lines of every non-test .go file under
// root (key "path") and of every function in them ("path:Func",
// "path:Type.Method"), paths relative to root with '/'. Folders the go
// tool ignores (testdata, and names starting with '.' or '_') are skipped.
func measure(root string) (map[string]int, error) {
	sizes := map[string]int{}
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if p != root && (name == "testdata" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			return nil
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		f, err := parser.ParseFile(fset, p, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		sizes[rel] = fset.File(f.Pos()).LineCount()
		for _, decl := range f.Decls {
			if fd, ok := decl.(*ast.FuncDecl); ok {
				sizes[rel+":"+funcName(fd)] = fset.Position(fd.End()).Line - fset.Position(fd.Pos()).Line + 1
			}
		}
		return nil
	})
	return sizes, err
}

// funcName is "Func" or "Type.Method".
func funcName(fd *ast.FuncDecl) string {
	if fd.Recv == nil || len(fd.Recv.List) == 0 {
		return fd.Name.Name
	}
	t := fd.Recv.List[0].Type
	for {
		switch x := t.(type) {
		case *ast.StarExpr:
			t = x.X
			continue
		case *ast.IndexExpr:
			t = x.X
			continue
		case *ast.IndexListExpr:
			t = x.X
			continue
		case *ast.Ident:
			return x.Name + "." + fd.Name.Name
		}
		return fd.Name.Name
	}
}

func check(sizes map[string]int) []string { return checkWith(sizes, allowed) }

// checkWith lists, sorted, each file and function of sizes over its limit
// and not held by allow at its size or more, and each entry of allow that
// no longer breaks a rule.
func checkWith(sizes, allow map[string]int) []string {
	var out []string
	for key, n := range sizes {
		limit := limitOf(key)
		if n <= limit {
			continue
		}
		switch a, ok := allow[key]; {
		case !ok:
			out = append(out, fmt.Sprintf("%s: %d lines, over %d", key, n, limit))
		case n > a:
			out = append(out, fmt.Sprintf("%s: %d lines, over %d (the allow-list holds it at %d: it may only shrink)", key, n, limit, a))
		}
	}
	for key, a := range allow {
		if n, ok := sizes[key]; !ok || n <= limitOf(key) {
			out = append(out, fmt.Sprintf("%s: on the allow-list (%d) but no longer over its limit: remove it from the list", key, a))
		}
	}
	slices.Sort(out)
	return out
}

// limitOf is the rule for a key: a function's or a file's.
func limitOf(key string) int {
	if strings.Contains(key, ":") {
		return maxFuncLines
	}
	return maxFileLines
}

// moduleRoot is the folder holding go.mod, above this package's.
func moduleRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above " + dir)
		}
		dir = parent
	}
}
