package server_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/stratadb/strata/server"
)

// Every integer query parameter of every route is read by one rule: an
// integer within int64 and the range the OpenAPI document declares, or
// 400 naming the parameter.
func TestIntegerQueryParametersShareOneRule(t *testing.T) {
	f := start(t, "file://"+t.TempDir(), server.Options{})
	if _, err := f.c.CreateTable(ctx, "events", events); err != nil {
		t.Fatal(err)
	}
	if code, msg := post(t, f, "/api/v1/tables/events/rows", server.NDJSON, []byte(`{"id": 1, "msg": "a"}`)); code != http.StatusOK {
		t.Fatalf("append: %d %s", code, msg)
	}
	const rows, versions = "/api/v1/tables/events/rows", "/api/v1/tables/events/versions"
	for _, c := range []struct{ path, want string }{
		{versions + "?limit=-5", "limit=-5: want at least 0"},
		{versions + "?limit=99999999999999999999", `limit="99999999999999999999": out of range`},
		{versions + "?limit=%2B3", `limit="+3": want an integer`},
		{rows + "?limit=-1", "limit=-1: want at least 0"},
		{rows + "?version=0", "version=0: want at least 1"},
		{rows + "?version=-3", "version=-3: want at least 1"},
		{rows + "?version=18446744073709551615", "out of range"},
	} {
		code, body := raw(t, f, "GET", c.path, "", "", "")
		var e struct{ Error struct{ Message string } }
		_ = json.Unmarshal([]byte(body), &e)
		if code != http.StatusBadRequest || !strings.Contains(e.Error.Message, c.want) {
			t.Errorf("GET %s: %d %s, want 400 saying %q", c.path, code, body, c.want)
		}
	}
	for _, path := range []string{versions + "?limit=1", versions + "?limit=0", rows + "?limit=0&format=jsonl", rows + "?version=1&format=jsonl"} {
		if code, body := raw(t, f, "GET", path, "", "", ""); code != http.StatusOK {
			t.Errorf("GET %s: %d %s", path, code, body)
		}
	}
}

// The OpenAPI document bounds every integer query parameter it declares
// from below, so that no route takes a negative count or version by
// omission.
func TestEveryIntegerQueryParameterHasAMinimum(t *testing.T) {
	var doc struct {
		Paths map[string]map[string]struct {
			Parameters []struct {
				Name, In string
				Schema   map[string]any
			}
		}
	}
	if err := json.Unmarshal(server.OpenAPI, &doc); err != nil {
		t.Fatal(err)
	}
	n := 0
	for path, methods := range doc.Paths {
		for method, op := range methods {
			for _, p := range op.Parameters {
				if p.In != "query" || p.Schema["type"] != "integer" {
					continue
				}
				n++
				if _, ok := p.Schema["minimum"].(float64); !ok {
					t.Errorf("%s %s: %s= has no minimum", method, path, p.Name)
				}
			}
		}
	}
	if n == 0 {
		t.Fatal("the document declares no integer query parameter")
	}
}
