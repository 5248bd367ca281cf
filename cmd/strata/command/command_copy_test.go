package command

import (
	"os"
	"strings"
	"testing"
)

// copy refuses, as a usage error before anything is written, a copy of a
// table into itself or into a folder of its own, and names a source that
// is not a table as the source.
func TestCopyRefusesWhereItCannotGo(t *testing.T) {
	dir := t.TempDir()
	src := "file://" + dir + "/t"
	schema := dir + "/schema.json"
	if err := os.WriteFile(schema, []byte(`{"fields":[{"name":"id","type":"int64"}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, errOut := run(t, nil, "create", src, "--schema", schema); code != 0 {
		t.Fatalf("create: %d %s", code, errOut)
	}
	for _, dst := range []string{src, src + "/", dir + "/t", src + "/data/bk", src + "/_versions/bk", "file://" + dir} {
		if code, _, errOut := run(t, nil, "copy", src, dst); code != 2 || !strings.Contains(errOut, "not copied into itself") {
			t.Errorf("copy %s %s: exit %d: %s", src, dst, code, errOut)
		}
	}
	code, _, errOut := run(t, nil, "copy", "file://"+dir+"/none", "file://"+dir+"/copy")
	if code != 5 || !strings.Contains(errOut, "no table at file://"+dir+"/none") {
		t.Fatalf("copy of no table: exit %d: %s", code, errOut)
	}
}
