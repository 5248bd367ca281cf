package server_test

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/stratadb/strata/server"
)

// openAPI is the parsed document.
type openAPI struct {
	Paths      map[string]map[string]json.RawMessage `json:"paths"`
	Components struct {
		Schemas map[string]any `json:"schemas"`
	} `json:"components"`
}

// validate checks v against schema (the subset the document uses: $ref,
// type — one or a list with "null" —, properties, required, items), and
// refuses properties the schema does not name: the document must list
// every field the server sends.
func validate(doc *openAPI, schema map[string]any, v any, at string) []string {
	if r, ok := schema["$ref"].(string); ok {
		s, ok := doc.Components.Schemas[strings.TrimPrefix(r, "#/components/schemas/")].(map[string]any)
		if !ok {
			return []string{at + ": unresolved " + r}
		}
		return validate(doc, s, v, at)
	}
	var types []string
	switch t := schema["type"].(type) {
	case string:
		types = []string{t}
	case []any:
		for _, x := range t {
			types = append(types, x.(string))
		}
	}
	ok := len(types) == 0
	for _, t := range types {
		switch t {
		case "null":
			ok = ok || v == nil
		case "string":
			_, is := v.(string)
			ok = ok || is
		case "boolean":
			_, is := v.(bool)
			ok = ok || is
		case "number":
			_, is := v.(float64)
			ok = ok || is
		case "integer":
			f, is := v.(float64)
			ok = ok || (is && f == math.Trunc(f))
		case "array":
			_, is := v.([]any)
			ok = ok || is
		case "object":
			_, is := v.(map[string]any)
			ok = ok || is
		}
	}
	if !ok {
		return []string{fmt.Sprintf("%s: %v is not %v", at, v, types)}
	}
	var errs []string
	switch x := v.(type) {
	case map[string]any:
		props, _ := schema["properties"].(map[string]any)
		for _, r := range schema["required"].([]any) {
			if _, ok := x[r.(string)]; !ok {
				errs = append(errs, at+": missing "+r.(string))
			}
		}
		for k, val := range x {
			ps, ok := props[k].(map[string]any)
			if !ok {
				if props != nil {
					errs = append(errs, at+": undocumented field "+k)
				}
				continue
			}
			errs = append(errs, validate(doc, ps, val, at+"."+k)...)
		}
	case []any:
		if items, ok := schema["items"].(map[string]any); ok {
			for i, e := range x {
				errs = append(errs, validate(doc, items, e, fmt.Sprintf("%s[%d]", at, i))...)
			}
		}
	}
	return errs
}

// The OpenAPI document served at /api/v1/openapi.json names exactly the
// server's routes, and the server's JSON answers match its schemas, field
// for field.
func TestOpenAPIMatchesTheServer(t *testing.T) {
	f := start(t, "file://"+t.TempDir(), server.Options{})
	code, body := raw(t, f, "GET", "/api/v1/openapi.json", "", "", "")
	var doc openAPI
	if code != 200 || json.Unmarshal([]byte(body), &doc) != nil {
		t.Fatalf("openapi.json: %d", code)
	}
	var documented []string
	for path, ops := range doc.Paths {
		for method := range ops {
			documented = append(documented, strings.ToUpper(method)+" "+path)
		}
	}
	routes := f.srv.Routes()
	slices.Sort(documented)
	slices.Sort(routes)
	if !slices.Equal(documented, routes) {
		t.Fatalf("documented routes:\n%s\nserved routes:\n%s", strings.Join(documented, "\n"), strings.Join(routes, "\n"))
	}
	// Every schema may be missing "required"; give it one to walk.
	for _, s := range doc.Components.Schemas {
		if m := s.(map[string]any); m["required"] == nil {
			m["required"] = []any{}
		}
	}
	var fillRequired func(any)
	fillRequired = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			if x["type"] == "object" && x["required"] == nil {
				x["required"] = []any{}
			}
			for _, e := range x {
				fillRequired(e)
			}
		case []any:
			for _, e := range x {
				fillRequired(e)
			}
		}
	}
	fillRequired(doc.Components.Schemas)

	// check sends a request and validates its JSON answer against the
	// document's schema for that route and status.
	check := func(method, route, path, ctype, reqBody string, want int) {
		t.Helper()
		h := http.Header{}
		if ctype != "" {
			h.Set("Content-Type", ctype)
		}
		resp, body := send(t, f, method, path, h, reqBody)
		data := []byte(body)
		if resp.StatusCode != want {
			t.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, data)
		}
		var op struct {
			Responses map[string]struct {
				Content map[string]struct {
					Schema map[string]any `json:"schema"`
				} `json:"content"`
			} `json:"responses"`
		}
		if err := json.Unmarshal(doc.Paths[route][strings.ToLower(method)], &op); err != nil {
			t.Fatalf("%s %s is not documented: %v", method, route, err)
		}
		r, ok := op.Responses[fmt.Sprint(want)]
		if !ok {
			t.Fatalf("%s %s: status %d is not documented", method, route, want)
		}
		c, ok := r.Content["application/json"]
		if !ok {
			if len(data) != 0 && len(r.Content) == 0 {
				t.Fatalf("%s %s %d: a body the document does not describe: %s", method, route, want, data)
			}
			return
		}
		fillRequired(c.Schema)
		var v any
		if err := json.Unmarshal(data, &v); err != nil {
			t.Fatalf("%s %s: not JSON: %s", method, path, data)
		}
		if errs := validate(&doc, c.Schema, v, method+" "+route); len(errs) > 0 {
			t.Fatalf("the answer does not match the document:\n%s\n%s", strings.Join(errs, "\n"), data)
		}
	}
	const T = "/api/v1/tables/{name}"
	check("PUT", T, "/api/v1/tables/t", "application/json", `{"fields":[{"name":"id","type":"int64"},{"name":"msg","type":"string","nullable":true}]}`, 201)
	check("GET", T, "/api/v1/tables/t", "", "", 200)
	check("GET", "/api/v1/tables", "/api/v1/tables", "", "", 200)
	check("POST", T+"/rows", "/api/v1/tables/t/rows", "application/x-ndjson", "{\"id\":1,\"msg\":null}\n{\"id\":2,\"msg\":\"b\"}\n", 200)
	check("GET", T+"/lsm/stats", "/api/v1/tables/t/lsm/stats", "", "", 200)
	check("GET", T+"/lsm/stats", "/api/v1/tables/t/lsm/stats?include_generation_rows=true", "", "", 200)
	check("POST", T+"/compact", "/api/v1/tables/t/compact", "application/json", `{"min_fragments":99}`, 409)
	check("DELETE", T+"/rows", "/api/v1/tables/t/rows?filter=id%3D1", "", "", 200)
	check("GET", T+"/versions", "/api/v1/tables/t/versions?detail=true", "", "", 200)
	check("POST", T+"/tags", "/api/v1/tables/t/tags", "application/json", `{"name":"v1"}`, 201)
	check("GET", T+"/tags", "/api/v1/tables/t/tags", "", "", 200)
	check("POST", T+"/compact", "/api/v1/tables/t/compact", "application/json", `{"dry_run":true}`, 200)
	check("GET", T+"/fragments", "/api/v1/tables/t/fragments", "", "", 200)
	check("GET", T+"/fragments", "/api/v1/tables/t/fragments?version=1", "", "", 200)
	check("GET", T+"/compact/stats", "/api/v1/tables/t/compact/stats", "", "", 200)
	check("POST", T+"/indexes", "/api/v1/tables/t/indexes", "application/json", `{"column":"id"}`, 201)
	check("POST", T+"/indexes", "/api/v1/tables/t/indexes", "application/json", `{"column":"nope"}`, 400)
	check("GET", T+"/indexes", "/api/v1/tables/t/indexes", "", "", 200)
	check("POST", T+"/lsm/flush", "/api/v1/tables/t/lsm/flush", "", "", 202)
	check("DELETE", T+"/tags/{tag}", "/api/v1/tables/t/tags/v1", "", "", 204)
	check("POST", T+"/rows", "/api/v1/tables/t/rows?mode=upsert&key=id", "application/x-ndjson", "{\"id\":2,\"msg\":\"c\"}\n{\"id\":3,\"msg\":null}\n", 200)
	check("POST", T+"/rows", "/api/v1/tables/t/rows?mode=upsert", "application/x-ndjson", "{\"id\":4}\n", 400)
	check("PATCH", T+"/rows", "/api/v1/tables/t/rows?filter=id%3D2", "application/json", `{"set":{"msg":"d"}}`, 200)
	check("PATCH", T+"/rows", "/api/v1/tables/t/rows?filter=id%3D2", "application/json", `{"set":{"id":null}}`, 400)
	check("POST", T+"/schema", "/api/v1/tables/t/schema", "application/json", `{"changes":[{"op":"add","column":"grade","type":"float64"},{"op":"rename","column":"msg","to":"note"}]}`, 200)
	check("POST", T+"/schema", "/api/v1/tables/t/schema", "application/json", `{"changes":[{"op":"widen","column":"note","type":"int64"}]}`, 400)
	check("GET", T, "/api/v1/tables/missing", "", "", 404)
	check("POST", T+"/rows", "/api/v1/tables/t/rows", "text/csv", "id\n1\n", 415)
	check("DELETE", T, "/api/v1/tables/t", "", "", 204)
}
