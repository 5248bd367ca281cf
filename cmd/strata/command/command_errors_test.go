package command

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The table verbs' errors say what is wrong and what the table has: a
// version it has not names its newest and where to see the others, a
// column it has not names its columns, changes from beyond the newest
// version name it.
func TestErrorsNameWhatTheTableHas(t *testing.T) {
	dir := t.TempDir()
	u := "file://" + dir + "/events"
	schema := filepath.Join(dir, "schema.json")
	if err := os.WriteFile(schema, []byte(`{"fields":[{"name":"id","type":"int64"},{"name":"reward","type":"float64"}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, errOut := run(t, nil, "create", u, "--schema", schema); code != 0 {
		t.Fatalf("create: %d %s", code, errOut)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"scan", u, "--version", "9"}, "version 9: version not found (the table's newest version is 1; garbage collection deletes old ones: strata versions " + u + " lists those there are)"},
		{[]string{"restore", u, "--version", "9"}, "the table's newest version is 1"},
		{[]string{"scan", u, "--filter", "rewrad > 0.5"}, `no column "rewrad" (the table's columns: id, reward)`},
		{[]string{"scan", u, "--columns", "ids"}, `no column "ids" (the table's columns: id, reward)`},
		{[]string{"changes", u, "--from", "7"}, "changes from version 7: the table's newest version is 1"},
		{[]string{"create", u, "--schema", schema}, "a table exists there already (at version 1)"},
	} {
		code, _, errOut := run(t, nil, c.args...)
		if code != 1 || !strings.Contains(errOut, c.want) {
			t.Errorf("strata %s: exit %d %q, want 1 and %q", strings.Join(c.args, " "), code, errOut, c.want)
		}
	}
}
