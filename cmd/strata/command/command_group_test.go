package command

import (
	"os"
	"strings"
	"testing"
)

// strata follow --group --member prints the member's share of each new
// version with the unit of each row, and records it in the group: a
// single member takes every unit; run again, it prints only what landed
// since. The flags go together.
func TestFollowAsAGroupMember(t *testing.T) {
	dir := t.TempDir()
	schema := dir + "/events.json"
	if err := os.WriteFile(schema, []byte(`{"fields":[{"name":"id","type":"int64"}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	u := "file://" + dir + "/events"
	if code, _, errOut := run(t, nil, "create", u, "--schema", schema); code != 0 {
		t.Fatalf("create: %s", errOut)
	}
	appendIDs := func(name, ids string) {
		t.Helper()
		os.WriteFile(dir+"/"+name, []byte("id\n"+ids), 0o644)
		if code, _, errOut := run(t, nil, "append", u, dir+"/"+name); code != 0 {
			t.Fatalf("append %s: %s", name, errOut)
		}
	}
	follow := func() string {
		t.Helper()
		code, out, errOut := run(t, nil, "follow", u, "--group", "learners", "--member", "m0", "--exit-when-idle", "--poll", "1ms")
		if code != 0 {
			t.Fatalf("follow: exit %d %s", code, errOut)
		}
		return out
	}
	appendIDs("a.csv", "1\n2\n")
	want := `{"id":1,"_change":"insert","_version":2,"_unit":0}
{"id":2,"_change":"insert","_version":2,"_unit":0}
{"_change":"through","_version":2}
`
	if got := follow(); got != want {
		t.Fatalf("the first follow printed\n%s\nwant\n%s", got, want)
	}
	appendIDs("b.csv", "3\n")
	if code, _, errOut := run(t, nil, "delete", u, "--filter", "id = 1"); code != 0 {
		t.Fatalf("delete: %s", errOut)
	}
	want = `{"id":3,"_change":"insert","_version":3,"_unit":1}
{"id":1,"_change":"delete","_version":4,"_unit":0}
{"_change":"through","_version":4}
`
	if got := follow(); got != want {
		t.Fatalf("the next follow printed\n%s\nwant\n%s", got, want)
	}
	if code, out, _ := run(t, nil, "stats", u); code != 0 || !strings.Contains(out, "consumer group learners") || !strings.Contains(out, "through v4 (lag 0 versions)") {
		t.Errorf("stats: exit %d\n%s", code, out)
	}
	for _, args := range [][]string{{"--group", "g"}, {"--member", "m"}, {"--group", "g", "--member", "m", "--consumer", "c"}, {"--group", "g", "--member", "a/b"}} {
		code, _, errOut := run(t, nil, append([]string{"follow", u, "--exit-when-idle"}, args...)...)
		if code == 0 || !strings.Contains(errOut, "member") && !strings.Contains(errOut, "group") {
			t.Errorf("follow %v: exit %d %s", args, code, errOut)
		}
	}
}
