package server_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stratadb/strata/server"
)

// An error over HTTP says what the CLI says: a missing table by its name,
// a missing version with the newest there is, a token that is missing
// otherwise than one that is wrong, rows by their line and a value by what
// its column takes — never a Go library's words.
func TestErrorsOverHTTPNameWhatIsWrong(t *testing.T) {
	f := start(t, "file://"+t.TempDir(), server.Options{Token: "sekrit"})
	first := eventBatch(1)
	defer first.Release()
	if _, err := f.c.CreateTable(ctx, "events", events, first); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		method, path, ctype, body, token string
		status                           int
		says                             string
	}{
		{"GET", "/api/v1/tables/evnets", "", "", "sekrit", 404, `no table \"evnets\" under the server's bucket`},
		{"GET", "/api/v1/tables/events/rows?version=9", "", "", "sekrit", 404, `table \"events\": table: version 9: version not found (the table's newest version is 1`},
		{"GET", "/api/v1/tables/events", "", "", "", 401, "a bearer token is required"},
		{"GET", "/api/v1/tables/events", "", "", "wrong", 401, "the bearer token is not this server's"},
		{"POST", "/api/v1/tables/events/rows", "application/x-ndjson", "{\"id\": 1, \"msg\": \"a\"}\n\n{\"id\": \"seven\", \"msg\": \"b\"}\n", "sekrit", 400,
			`JSON line 3: column \"id\": \"seven\" is not a valid int64: want an integer such as 42`},
		{"POST", "/api/v1/tables/events/rows", "application/x-ndjson", `{"id": 2, "msg"`, "sekrit", 400, "not complete JSON"},
		{"POST", "/api/v1/tables/events/rows?mode=upsert&key=id", "application/x-ndjson", "{\"id\": 7, \"msg\": \"a\"}\n\n{\"id\": 7, \"msg\": \"b\"}\n", "sekrit", 400,
			`JSON line 3: column \"id\": the key appears twice`},
		{"GET", "/api/v1/tables/events/rows?as_of=noon", "", "", "sekrit", 400, `\"noon\" is not a time`},
		{"GET", "/api/v1/tables/events/rows?as_of=", "", "", "sekrit", 400, "is not a time"},
		{"GET", "/api/v1/tables/events/rows?as_of=0001-01-01T00:00:00Z", "", "", "sekrit", 404, "no version was committed at or before"},
		{"PATCH", "/api/v1/tables/events/rows?filter=id%3D1", "application/json", `garbage`, "sekrit", 400, "not JSON at byte"},
		{"PATCH", "/api/v1/tables/events/rows?filter=id%3D1", "application/json", `{"set_sql": 5}`, "sekrit", 400, "set_sql is number; want a string"},
		{"PATCH", "/api/v1/tables/events/rows?filter=id%3D1", "application/json", `{"sett": {"msg": "x"}}`, "sekrit", 400, "sett"},
		{"PATCH", "/api/v1/tables/events/rows?filter=id%3D1", "application/json", `{"set_sql": "msg = 'x'"} {"x": 1}`, "sekrit", 400, "more than one JSON value"},
		{"PATCH", "/api/v1/tables/events/rows?filter=id%3D1", "application/json", ``, "sekrit", 400, "the body is empty"},
		{"POST", "/api/v1/tables/events/restore", "application/json", `{"version": -1}`, "sekrit", 400, "version is number -1; want an integer from 0 up"},
		{"POST", "/api/v1/tables/events/rows?mode=append&when_matched=ignore", "application/x-ndjson", "{\"id\": 5, \"msg\": \"a\"}\n", "sekrit", 400, "is an upsert's: give mode=upsert"},
		{"POST", "/api/v1/tables/events/rows?mode=overwrite&key=id", "application/x-ndjson", "{\"id\": 5, \"msg\": \"a\"}\n", "sekrit", 400, "is an upsert's"},
		{"POST", "/api/v1/tables/events/rows?through=table", "application/x-ndjson", "{\"id\": 5, \"msg\": \"a\"}\n", "sekrit", 400, "an append goes through the server's shard"},
		{"POST", "/api/v1/tables/events/rows?through=shard&mode=overwrite", "application/x-ndjson", "{\"id\": 5, \"msg\": \"a\"}\n", "sekrit", 400, "an overwrite to the table"},
		{"GET", "/api/v1/tables/events", "", "", "", 401, "a bearer token is required"},
	} {
		code, out := raw(t, f, c.method, c.path, c.ctype, c.body, c.token)
		if code != c.status || !strings.Contains(out, c.says) {
			t.Errorf("%s %s: %d %s, want %d saying %s", c.method, c.path, code, out, c.status, c.says)
		}
		for _, goText := range []string{"strconv", "json: cannot", "Go value", "invalid character"} {
			if strings.Contains(out, goText) {
				t.Errorf("%s %s: %s says %q", c.method, c.path, out, goText)
			}
		}
	}
	if resp, out := send(t, f, "GET", "/api/v1/tables/events", http.Header{"Authorization": {"bearer sekrit"}}, ""); resp.StatusCode != http.StatusOK {
		t.Errorf("the scheme's name in lower case: %d %s", resp.StatusCode, out)
	}
	resp, _ := send(t, f, "GET", "/api/v1/tables/events", http.Header{"Authorization": {"Bearer wrong"}}, "")
	if got := resp.Header.Get("WWW-Authenticate"); !strings.Contains(got, `error="invalid_token"`) {
		t.Errorf("a wrong token's WWW-Authenticate: %q", got)
	}
}
