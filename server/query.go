package server

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// queryParam is one query parameter a route takes, as the OpenAPI
// document declares it.
type queryParam struct {
	Type string   // "string", "integer" or "boolean"
	Enum []string // when set, the values allowed
	// Minimum and Maximum bound an integer (absent: no bound but int64's).
	Minimum *int64
	Maximum *int64
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
// IPC), or an integer outside the range the document declares (limit=-5).
// An empty value counts as an absent parameter. Handlers then read
// integers with intQuery.
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
			if _, err := parseInteger(name, v, p); err != nil {
				return err
			}
		}
	}
	return nil
}

// parseInteger reads an integer query parameter: an optional minus sign
// and decimal digits, within int64 and the parameter's declared range.
func parseInteger(name, v string, p queryParam) (int64, error) {
	digits := strings.TrimPrefix(v, "-")
	if digits == "" || strings.TrimLeft(digits, "0123456789") != "" {
		return 0, badRequest("%s=%q: want an integer", name, v)
	}
	n, err := strconv.ParseInt(v, 10, 64)
	switch {
	case err != nil:
		return 0, badRequest("%s=%q: out of range", name, v)
	case p.Minimum != nil && n < *p.Minimum:
		return 0, badRequest("%s=%d: want at least %d", name, n, *p.Minimum)
	case p.Maximum != nil && n > *p.Maximum:
		return 0, badRequest("%s=%d: want at most %d", name, n, *p.Maximum)
	}
	return n, nil
}

// intQuery returns the integer query parameter name of r, and whether it
// was given (an empty value is not). checkQuery, which runs before every
// handler, has refused a value that is not an integer in its declared
// range.
func intQuery(r *http.Request, name string) (n int64, given bool) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return 0, false
	}
	n, err := strconv.ParseInt(v, 10, 64)
	return n, err == nil
}
