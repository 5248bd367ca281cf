package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stratadb/strata/server"
)

// grantTokens makes a tokens file of one fresh token per name, with its
// grants, and returns the file's path and the tokens by name.
func grantTokens(t *testing.T, grants map[string][]string) (string, map[string]string) {
	t.Helper()
	var lines []string
	tokens := map[string]string{}
	for name, gs := range grants {
		var parsed []server.Grant
		for _, g := range gs {
			grant, err := server.ParseGrant(g)
			if err != nil {
				t.Fatal(err)
			}
			parsed = append(parsed, grant)
		}
		token, line, err := server.NewToken(name, parsed)
		if err != nil {
			t.Fatal(err)
		}
		tokens[name], lines = token, append(lines, line)
	}
	path := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(path, []byte("# the test's tokens\n"+strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return path, tokens
}

// Each verb of the API against each kind of token: a request outside the
// token's grants is refused 403 with the grant it lacks named, before the
// table is looked at (a drop of a table that is not there is 403 too); one
// inside them is not refused.
func TestGrantsByVerb(t *testing.T) {
	path, tokens := grantTokens(t, map[string][]string{
		"reader":   {"read:runs/*"},
		"appender": {"append:runs/*"},
		"writer":   {"write:runs/*"},
		"admin":    {"admin:*"},
		"stranger": {"read:other/*"},
		"watcher":  {"read:*"},
	})
	tk, err := server.LoadTokens(path)
	if err != nil {
		t.Fatal(err)
	}
	var log lockedBuffer
	f := start(t, "file://"+t.TempDir(), server.Options{Tokens: tk, Log: slog.New(slog.NewJSONHandler(&log, nil))})
	code, body := raw(t, f, "PUT", "/api/v1/tables/runs%2Fa", "application/json", `{"fields":[{"name":"id","type":"int64"}]}`, tokens["admin"])
	if code != http.StatusCreated {
		t.Fatalf("create as admin: %d %s", code, body)
	}
	type request struct{ method, path, ctype, body string }
	const tb = "/api/v1/tables/runs%2Fa"
	requests := map[string]request{
		"describe":       {"GET", tb, "", ""},
		"scan":           {"GET", tb + "/rows", "", ""},
		"changes":        {"GET", tb + "/changes?from=0", "", ""},
		"set consumer":   {"PUT", tb + "/consumers/c1", "application/json", `{"version":1}`},
		"delete group":   {"DELETE", tb + "/groups/g1", "", ""},
		"append":         {"POST", tb + "/rows", "application/x-ndjson", `{"id":1}` + "\n"},
		"flush":          {"POST", tb + "/lsm/flush", "", ""},
		"upsert":         {"POST", tb + "/rows?mode=upsert&key=id", "application/x-ndjson", `{"id":1}` + "\n"},
		"delete":         {"DELETE", tb + "/rows?filter=id%3D7", "", ""},
		"alter":          {"POST", tb + "/schema", "application/json", `{"add":[{"name":"x","type":"int64","nullable":true}]}`},
		"create":         {"PUT", "/api/v1/tables/runs%2Fb", "application/json", `{"fields":[{"name":"id","type":"int64"}]}`},
		"drop":           {"DELETE", "/api/v1/tables/runs%2Fnone", "", ""},
		"compact":        {"POST", tb + "/compact", "", ""},
		"tag":            {"POST", tb + "/tags", "application/json", `{"name":"t1"}`},
		"iceberg load":   {"GET", server.IcebergPrefix + "/v1/namespaces/runs/tables/a", "", ""},
		"iceberg commit": {"POST", server.IcebergPrefix + "/v1/namespaces/runs/tables/a", "application/json", `{}`},
		"metrics":        {"GET", "/metrics", "", ""},
	}
	// The grant each request needs; "" where the token may.
	lacks := map[string]map[string]string{
		"reader": {"delete group": "admin:runs/a", "append": "append:runs/a", "flush": "append:runs/a", "upsert": "write:runs/a", "delete": "write:runs/a",
			"alter": "write:runs/a", "create": "admin:runs/b", "drop": "admin:runs/none", "compact": "admin:runs/a", "tag": "admin:runs/a",
			"iceberg commit": "append:runs/a", "metrics": "read:*"},
		"appender": {"set consumer": "read:runs/a", "delete group": "admin:runs/a", "scan": "read:runs/a", "changes": "read:runs/a", "upsert": "write:runs/a", "delete": "write:runs/a",
			"alter": "write:runs/a", "create": "admin:runs/b", "drop": "admin:runs/none", "compact": "admin:runs/a", "tag": "admin:runs/a",
			"iceberg load": "read:runs/a", "metrics": "read:*"},
		"writer": {"set consumer": "read:runs/a", "delete group": "admin:runs/a", "scan": "read:runs/a", "changes": "read:runs/a", "create": "admin:runs/b", "drop": "admin:runs/none",
			"compact": "admin:runs/a", "tag": "admin:runs/a", "iceberg load": "read:runs/a", "metrics": "read:*"},
		"admin": {},
		"stranger": {"describe": "read:runs/a", "set consumer": "read:runs/a", "delete group": "admin:runs/a", "scan": "read:runs/a", "changes": "read:runs/a", "append": "append:runs/a", "flush": "append:runs/a",
			"upsert": "write:runs/a", "delete": "write:runs/a", "alter": "write:runs/a", "create": "admin:runs/b", "drop": "admin:runs/none",
			"compact": "admin:runs/a", "tag": "admin:runs/a", "iceberg load": "read:runs/a", "iceberg commit": "append:runs/a", "metrics": "read:*"},
		"watcher": {"delete group": "admin:runs/a", "append": "append:runs/a", "flush": "append:runs/a", "upsert": "write:runs/a", "delete": "write:runs/a", "alter": "write:runs/a",
			"create": "admin:runs/b", "drop": "admin:runs/none", "compact": "admin:runs/a", "tag": "admin:runs/a", "iceberg commit": "append:runs/a"},
	}
	for who, token := range tokens {
		for what, req := range requests {
			code, body := raw(t, f, req.method, req.path, req.ctype, req.body, token)
			want := lacks[who][what]
			switch {
			case want != "" && code != http.StatusForbidden:
				t.Errorf("%s %s: %d, want 403 for lack of %s: %.200s", who, what, code, want, body)
			case want != "" && !strings.Contains(body, want):
				t.Errorf("%s %s: 403 without naming the grant %s: %.200s", who, what, want, body)
			case want == "" && (code == http.StatusForbidden || code == http.StatusUnauthorized):
				t.Errorf("%s %s: refused (%d) within its grants: %.200s", who, what, code, body)
			}
		}
	}
	// The list shows the tables a token has a grant on.
	for who, want := range map[string]int{"reader": 2, "stranger": 0, "admin": 2} {
		code, body := raw(t, f, "GET", "/api/v1/tables", "", "", tokens[who])
		var list struct{ Tables []struct{ Name string } }
		if err := json.Unmarshal([]byte(body), &list); code != http.StatusOK || err != nil || len(list.Tables) != want {
			t.Errorf("%s lists %d tables (%d %v), want %d: %s", who, len(list.Tables), code, err, want, body)
		}
	}
	// The access log names each token, and holds none.
	logged := log.String()
	for who, token := range tokens {
		if strings.Contains(logged, token) || strings.Contains(logged, token[len(token)-12:]) {
			t.Errorf("the log holds %s's token", who)
		}
		if !strings.Contains(logged, fmt.Sprintf(`"token":%q`, who)) {
			t.Errorf("the log does not name the token %s", who)
		}
	}
}

// The tokens file is read again: a token added works without a restart,
// one removed is refused; a file gone bad leaves the tokens before it.
func TestTokensFileReloads(t *testing.T) {
	path, tokens := grantTokens(t, map[string][]string{"old": {"read:*"}})
	tk, err := server.LoadTokens(path)
	if err != nil {
		t.Fatal(err)
	}
	f := start(t, "file://"+t.TempDir(), server.Options{Tokens: tk})
	if code, body := raw(t, f, "GET", "/api/v1/tables", "", "", tokens["old"]); code != http.StatusOK {
		t.Fatalf("the first token: %d %s", code, body)
	}
	reloads := make(chan error, 10)
	wctx, stop := context.WithCancel(context.Background())
	defer stop()
	go tk.Watch(wctx, 10*time.Millisecond, func(err error) { reloads <- err })
	path2, tokens2 := grantTokens(t, map[string][]string{"new-one": {"read:*"}})
	text, err := os.ReadFile(path2)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, text, 0o600); err != nil {
		t.Fatal(err)
	}
	// The watch sees the file change.
	if err := <-reloads; err != nil {
		t.Fatal(err)
	}
	stop()
	if code, body := raw(t, f, "GET", "/api/v1/tables", "", "", tokens2["new-one"]); code != http.StatusOK {
		t.Fatalf("the token added: %d %s", code, body)
	}
	if code, _ := raw(t, f, "GET", "/api/v1/tables", "", "", tokens["old"]); code != http.StatusUnauthorized {
		t.Fatalf("the token removed: %d, want 401", code)
	}
	if err := os.WriteFile(path, []byte("not a line of tokens\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := tk.Reload(); err == nil || !strings.Contains(err.Error(), path+":1") {
		t.Fatalf("a bad file: %v, want its line named", err)
	}
	if code, _ := raw(t, f, "GET", "/api/v1/tables", "", "", tokens2["new-one"]); code != http.StatusOK {
		t.Fatalf("after a bad file, the tokens before: %d", code)
	}
}

// A tokens file's mistakes are named by line: a token pasted where its
// hash belongs (and not repeated in the error), an unknown verb, a line
// without grants.
func TestTokensFileErrors(t *testing.T) {
	for _, tc := range []struct{ text, want string }{
		{"strata_abcdefghijklmnopqrstuvwxyz0123456789ABCDEFG fleet read:*\n", "is not a SHA-256"},
		{strings.Repeat("a", 64) + " fleet fly:*\n", "field 3 is not a grant"},
		{strings.Repeat("a", 64) + " fleet strata_abcdefghijklmnopqrstuvwxyz0123456789ABCDEFG\n", "field 3 is not a grant"},
		{strings.Repeat("a", 64) + " strata_abcdefghijklmnopqrstuvwxyz0123456789ABCDEFG read:*\n", "field 2 is not a token's name"},
		{strings.Repeat("a", 64) + " fleet\n", "want SHA256 NAME GRANT"},
		{strings.Repeat("a", 64) + " a read:*\n" + strings.Repeat("a", 64) + " b read:*\n", "the token of line 1 again"},
	} {
		path := filepath.Join(t.TempDir(), "tokens")
		if err := os.WriteFile(path, []byte(tc.text), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := server.LoadTokens(path)
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "abcdefghij") {
			t.Errorf("%q: %v, want %q", tc.text, err, tc.want)
		}
	}
}

// strata token new makes only lines the tokens file reads back: a name
// or a pattern with what the file's format cannot carry is refused.
func TestNewTokenRefusesWhatTheFileCannotHold(t *testing.T) {
	for _, g := range []string{"read:#", "read:runs/#x", "read:a b", "read:a\u00a0b", "read:", "fly:*"} {
		if _, err := server.ParseGrant(g); err == nil {
			t.Errorf("grant %q accepted", g)
		}
	}
	for _, name := range []string{"", "a b", "a#b", "a\u00a0b", "a\rb", strings.Repeat("n", 65)} {
		if _, _, err := server.NewToken(name, []server.Grant{{Verb: server.Read, Pattern: "*"}}); err == nil {
			t.Errorf("token name %q accepted", name)
		}
	}
	_, line, err := server.NewToken("fleet-1.a_b", []server.Grant{{Verb: server.Append, Pattern: "runs/*-x.y_z"}})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(path, []byte(line+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if tk, err := server.LoadTokens(path); err != nil || tk.Len() != 1 {
		t.Fatalf("the line it made: %v", err)
	}
}

// A tokens file that does not parse is reported once per change of the
// file, not at every look.
func TestABadTokensFileIsReportedOnce(t *testing.T) {
	path, _ := grantTokens(t, map[string][]string{"a": {"read:*"}})
	tk, err := server.LoadTokens(path)
	if err != nil {
		t.Fatal(err)
	}
	var reports atomic.Int64
	wctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { tk.Watch(wctx, 5*time.Millisecond, func(error) { reports.Add(1) }); close(done) }()
	if err := os.WriteFile(path, []byte("garbage line\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	stop()
	<-done
	if n := reports.Load(); n != 1 {
		t.Fatalf("a bad file was reported %d times in 300 ms of looks every 5 ms, want once", n)
	}
	if tk.Len() != 1 {
		t.Fatalf("after a bad file, %d tokens, want the 1 before", tk.Len())
	}
}

// The Iceberg catalog resolves a name of the root namespace among the
// tables the token sees, and checks the grant on the table it resolved: a
// token reaches no table outside its grants through the alias, and learns
// nothing of one (default/z, beside the root's z) that it has no grant on.
func TestIcebergRootNamespaceResolvesAmongWhatTheTokenSees(t *testing.T) {
	path, tokens := grantTokens(t, map[string][]string{"admin": {"admin:*"}, "rootz": {"read:z"}, "nsz": {"read:default/z"}, "other": {"read:y"}})
	tk, err := server.LoadTokens(path)
	if err != nil {
		t.Fatal(err)
	}
	f := start(t, "file://"+t.TempDir(), server.Options{Tokens: tk})
	for _, name := range []string{"z", "default%2Fz"} {
		if code, body := raw(t, f, "PUT", "/api/v1/tables/"+name, "application/json", `{"fields":[{"name":"id","type":"int64"}]}`, tokens["admin"]); code != http.StatusCreated {
			t.Fatalf("create %s: %d %s", name, code, body)
		}
	}
	load := server.IcebergPrefix + "/v1/namespaces/default/tables/z"
	list := server.IcebergPrefix + "/v1/namespaces/default/tables"
	// This server has no Iceberg writer: a load answers 503 naming the
	// table it resolved.
	for _, c := range []struct {
		token, table string
	}{
		{"admin", "default/z"}, // the folder's table hides the root's
		{"nsz", "default/z"},
		{"rootz", "z"}, // default/z is none of its business
	} {
		code, body := raw(t, f, "GET", load, "", "", tokens[c.token])
		if code != http.StatusServiceUnavailable || !strings.Contains(body, `table \"`+c.table+`\"`) || c.table == "z" && strings.Contains(body, "default/z") {
			t.Errorf("%s loading default.z: %d %s; want the table %s", c.token, code, body, c.table)
		}
		if code, body := raw(t, f, "GET", list, "", "", tokens[c.token]); code != http.StatusOK || strings.Count(body, `"name":"z"`) != 1 {
			t.Errorf("%s listing default: %d %s; want z once", c.token, code, body)
		}
	}
	code, body := raw(t, f, "GET", load, "", "", tokens["other"])
	if code != http.StatusForbidden || strings.Contains(body, "exist") {
		t.Errorf("read:y loading default.z: %d %s; want 403 whatever is there", code, body)
	}
}
