package server

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
)

// queryParam is one query parameter a route takes, as the OpenAPI
// document declares it.
type queryParam struct {
	Type string   // "string", "integer" or "boolean"
	Enum []string // when set, the values allowed
}

// routeQueries maps a route's pattern ("GET /api/v1/tables/{name}/rows")
// to the query parameters it takes, read once from the OpenAPI document:
// the document is where a parameter is added, and the check follows it.
var routeQueries = sync.OnceValues(func() (map[string]map[string]queryParam, error) {
	var doc struct {
		Paths map[string]map[string]struct {
			Parameters []struct {
				Name, In string
				Schema   queryParam
			}
		}
	}
	if err := json.Unmarshal(OpenAPI, &doc); err != nil {
		return nil, fmt.Errorf("server: the OpenAPI document does not parse: %w", err)
	}
	out := map[string]map[string]queryParam{}
	for path, methods := range doc.Paths {
		for method, op := range methods {
			params := map[string]queryParam{}
			for _, p := range op.Parameters {
				if p.In == "query" {
					params[p.Name] = p.Schema
				}
			}
			out[strings.ToUpper(method)+" "+path] = params
		}
	}
	return out, nil
})

// checkQuery refuses a query string the route would misread: a parameter
// it does not take (a typo such as fitler= would otherwise scan every
// row), one given twice (only the first would count), or a value not of
// the parameter's type (fresh=1 would read as false, format=json as Arrow
// IPC). An empty value counts as an absent parameter.
func checkQuery(r *http.Request, pattern string, params map[string]queryParam) error {
	if r.URL.RawQuery == "" {
		return nil
	}
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return badRequest("the query string does not parse: %v", err)
	}
	for _, name := range slices.Sorted(maps.Keys(q)) {
		p, ok := params[name]
		if !ok {
			takes := "no query parameters"
			if len(params) > 0 {
				takes = strings.Join(slices.Sorted(maps.Keys(params)), "=, ") + "="
			}
			return badRequest("%s takes no %s= parameter (it takes %s)", pattern, name, takes)
		}
		vals := q[name]
		if len(vals) > 1 {
			return badRequest("%s= is given %d times; give it once", name, len(vals))
		}
		v := vals[0]
		if v == "" {
			continue
		}
		if len(p.Enum) > 0 && !slices.Contains(p.Enum, v) {
			return badRequest("%s=%q: want one of %s", name, v, strings.Join(p.Enum, ", "))
		}
		switch p.Type {
		case "boolean":
			if v != "true" && v != "false" {
				return badRequest("%s=%q: want true or false", name, v)
			}
		case "integer":
			if !isInteger(v) {
				return badRequest("%s=%q: want an integer", name, v)
			}
		}
	}
	return nil
}

// isInteger: an optional minus sign and decimal digits. (The handler
// checks the range.)
func isInteger(v string) bool {
	v = strings.TrimPrefix(v, "-")
	if v == "" {
		return false
	}
	for _, c := range v {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}
