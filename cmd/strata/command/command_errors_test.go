package command

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/compactor"
)

// The README's table of exit statuses is what the tool does: every
// command it shows, run against the table it describes, exits with the
// row's status and says the row's words (a row without a command is a
// test's of its own, named there).
func TestTheREADMEsErrorTableHolds(t *testing.T) {
	readme, err := os.ReadFile("../../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	section := string(readme)
	start := strings.Index(section, "## Errors and exit statuses")
	if start < 0 {
		t.Fatal("README.md has no section \"Errors and exit statuses\"")
	}
	section = section[start:]
	section = section[:strings.Index(section[3:], "\n## ")+3]
	row := regexp.MustCompile("(?m)^\\| (\\d) \\| [^|]*\\| (.*) \\| `([^`]*)` \\|$")
	rows := row.FindAllStringSubmatch(section, -1)
	if len(rows) < 10 {
		t.Fatalf("the README's error table has %d rows", len(rows))
	}

	dir := t.TempDir()
	u := "file://" + dir + "/events"
	schema := filepath.Join(dir, "schema.json")
	os.WriteFile(schema, []byte(`{"fields":[{"name":"id","type":"int64"},{"name":"reward","type":"float64"}]}`), 0o644)
	os.WriteFile(filepath.Join(dir, "bad.csv"), []byte("id,reward\n1,abc\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "bad.jsonl"), []byte(`{"id": "seven"}`+"\n"), 0o644)
	if code, _, errOut := run(t, nil, "create", u, "--schema", schema); code != 0 {
		t.Fatalf("create: %d %s", code, errOut)
	}
	b, err := blob.Open(context.Background(), u)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	seen := map[int]bool{}
	for _, r := range rows {
		status, _ := strconv.Atoi(r[1])
		seen[status] = true
		cmd := regexp.MustCompile("^`strata ([^`]*)`").FindStringSubmatch(r[2])
		if cmd == nil {
			// The row names the test of this package that holds it.
			name := regexp.MustCompile(`Test\w+`).FindString(r[2])
			if name == "" || !testExists(t, name) {
				t.Errorf("row %q: no command, and no test of this package named", r[0])
			}
			continue
		}
		args := shellWords(t, cmd[1])
		for i, a := range args {
			switch {
			case strings.HasPrefix(a, "URL"):
				args[i] = u + strings.TrimPrefix(a, "URL")
			case a == "schema.json" || strings.HasPrefix(a, "bad."):
				args[i] = filepath.Join(dir, a)
			}
		}
		if strings.Contains(r[2], "holds the table's lease") {
			job, err := compactor.TakeLease(context.Background(), b, "strata-compactor on node-7", time.Hour, time.Now())
			if err != nil {
				t.Fatal(err)
			}
			defer job.Release(context.Background())
		}
		code, out, errOut := run(t, nil, args...)
		if code != status || !strings.Contains(out+errOut, r[3]) {
			t.Errorf("strata %s: exit %d %q, want %d saying %q", cmd[1], code, out+errOut, status, r[3])
		}
	}
	for status := range 7 {
		if !seen[status] {
			t.Errorf("the README's error table has no row for exit status %d", status)
		}
	}
}

// testExists tells whether a test file of this package declares name.
func testExists(t *testing.T, name string) bool {
	files, err := filepath.Glob("*_test.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(src), "func "+name+"(") {
			return true
		}
	}
	return false
}

// shellWords splits a command as the README writes it: words, and
// 'quoted strings' as one word.
func shellWords(t *testing.T, s string) []string {
	var out []string
	for s = strings.TrimSpace(s); s != ""; s = strings.TrimSpace(s) {
		if s[0] == '\'' {
			end := strings.IndexByte(s[1:], '\'')
			if end < 0 {
				t.Fatalf("unclosed quote in %q", s)
			}
			out, s = append(out, s[1:end+1]), s[end+2:]
			continue
		}
		end := strings.IndexByte(s, ' ')
		if end < 0 {
			end = len(s)
		}
		out, s = append(out, s[:end]), s[end:]
	}
	return out
}
