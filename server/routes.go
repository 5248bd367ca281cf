package server

import (
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"reflect"
	"slices"
	"strings"

	"github.com/stratadb/strata/api"
	"github.com/stratadb/strata/table"
	"github.com/stratadb/strata/table/format"
)

// Media types, re-exported for the server's callers.
const (
	ArrowStream = api.ArrowStream
	NDJSON      = api.NDJSON
)

// routes registers every route; a query string is checked against the
// OpenAPI document's parameters for the route before its handler runs.
func (s *Server) routes() error {
	queries, err := routeQueries()
	if err != nil {
		return err
	}
	const t = tableRoute
	var unguarded []string
	handle := func(pattern string, h func(w http.ResponseWriter, r *http.Request) error) {
		if !s.handle(pattern, queries[pattern], h) {
			unguarded = append(unguarded, pattern)
		}
	}
	// Routes on an existing table get it resolved first (404 if none).
	onTable := func(pattern string, h func(w http.ResponseWriter, r *http.Request, t *tableState) error) {
		handle(pattern, func(w http.ResponseWriter, r *http.Request) error {
			name := r.PathValue("name")
			tb, err := s.table(r.Context(), name, false)
			if errors.Is(err, format.ErrNotFound) {
				return &apiError{http.StatusNotFound, api.CodeNotFound, fmt.Sprintf("no table %q under the server's bucket (GET /api/v1/tables lists them)", name)}
			}
			if err != nil {
				return err
			}
			err = h(w, r, tb)
			if errors.Is(err, format.ErrVersionNotFound) {
				// Name the table, and the newest version there is.
				if v, lerr := table.LatestVersion(r.Context(), tb.b); lerr == nil {
					err = fmt.Errorf("table %q: %w (the table's newest version is %d; GET …/versions lists those garbage collection kept)", name, err, v)
				}
			}
			return err
		})
	}
	handle("GET /api/v1/tables", s.listTables)
	handle("PUT "+t, s.createTable)
	onTable("GET "+t, s.describeTable)
	onTable("DELETE "+t, s.dropTable)
	onTable("POST "+t+"/rows", s.appendRows)
	onTable("GET "+t+"/rows", s.scanRows)
	onTable("DELETE "+t+"/rows", s.deleteRows)
	onTable("GET "+t+"/count", s.countRows)
	onTable("GET "+t+"/fragments", s.fragments)
	onTable("PATCH "+t+"/rows", s.updateRows)
	onTable("POST "+t+"/schema", s.alterTable)
	onTable("POST "+t+"/take", s.takeRows)
	onTable("GET "+t+"/versions", s.versions)
	onTable("GET "+t+"/changes", s.changes)
	onTable("POST "+t+"/restore", s.restore)
	onTable("GET "+t+"/consumers", s.consumers)
	onTable("PUT "+t+"/consumers/{consumer}", s.setConsumer)
	onTable("DELETE "+t+"/consumers/{consumer}", s.deleteConsumer)
	onTable("DELETE "+t+"/groups/{group}/members/{member}", s.leaveGroup)
	onTable("DELETE "+t+"/groups/{group}", s.deleteGroup)
	onTable("GET "+t+"/tags", s.tags)
	onTable("POST "+t+"/tags", s.createTag)
	onTable("DELETE "+t+"/tags/{tag}", s.deleteTag)
	onTable("GET "+t+"/indexes", s.indexes)
	onTable("POST "+t+"/indexes", s.createIndex)
	onTable("POST "+t+"/compact", s.compact)
	onTable("POST "+t+"/gc", s.gc)
	onTable("GET "+t+"/compact/stats", s.compactStats)
	onTable("POST "+t+"/lsm/flush", s.lsmFlush)
	onTable("POST "+t+"/lsm/merge", s.lsmMerge)
	// The merge's old name, kept working: it installs generations and
	// compacts nothing (compaction is POST …/compact).
	onTable("POST "+t+"/lsm/compact", s.lsmMerge)
	onTable("GET "+t+"/lsm/stats", s.lsmStats)
	handle("GET /healthz", func(w http.ResponseWriter, r *http.Request) error { _, err := io.WriteString(w, "ok\n"); return err })
	handle("GET /metrics", func(w http.ResponseWriter, r *http.Request) error {
		if !s.opts.OpenMetrics {
			if err := may(r, Read, "*"); err != nil {
				return err
			}
		}
		s.serveMetrics(w, r)
		return nil
	})
	handle("GET /api/v1/openapi.json", func(w http.ResponseWriter, r *http.Request) error {
		w.Header().Set("Content-Type", api.JSON)
		_, err := w.Write(OpenAPI)
		return err
	})
	if len(unguarded) > 0 {
		return fmt.Errorf("server: routes with no grant in tableRouteVerbs: %v", unguarded)
	}
	return nil
}

// handle registers a route whose query string is checked against params;
// a route on a table checks the request's token against the grant it
// needs first (403 whether or not the table is there). False for a route
// on a table with no grant in tableRouteVerbs.
func (s *Server) handle(pattern string, params map[string]queryParam, h func(w http.ResponseWriter, r *http.Request) error) bool {
	s.patterns = append(s.patterns, pattern)
	_, guarded := tableRouteVerbs[pattern]
	s.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		err := checkQuery(r, pattern, params)
		if err == nil && guarded {
			err = may(r, routeVerb(pattern, r), r.PathValue("name"))
		}
		if err == nil {
			err = h(w, r)
		}
		if err != nil {
			if fault := bodyFault(r); fault != nil {
				err = fault
			}
			fail(w, err)
		}
	})
	return guarded || !strings.Contains(pattern, "{name}")
}

// tableRouteVerbs are the verbs the routes on a table need of a token
// (see Verb); routes refuses to register one not listed here.
var tableRouteVerbs = map[string]Verb{
	"PUT " + tableRoute: Admin, "GET " + tableRoute: Describe, "DELETE " + tableRoute: Admin,
	"POST " + tableRoute + "/rows": Append, // Write for upserts and overwrites: routeVerb
	"GET " + tableRoute + "/rows":  Read, "DELETE " + tableRoute + "/rows": Write, "PATCH " + tableRoute + "/rows": Write,
	"GET " + tableRoute + "/count": Read, "GET " + tableRoute + "/fragments": Read,
	"POST " + tableRoute + "/schema": Write, "POST " + tableRoute + "/take": Read, "GET " + tableRoute + "/versions": Read,
	"GET " + tableRoute + "/changes": Read, "POST " + tableRoute + "/restore": Write,
	"GET " + tableRoute + "/consumers": Read, "PUT " + tableRoute + "/consumers/{consumer}": Read, // a consumer's position
	"DELETE " + tableRoute + "/consumers/{consumer}":            Admin,
	"DELETE " + tableRoute + "/groups/{group}/members/{member}": Read, // a member leaving its group
	"DELETE " + tableRoute + "/groups/{group}":                  Admin,
	"GET " + tableRoute + "/tags":                               Read, "POST " + tableRoute + "/tags": Admin, "DELETE " + tableRoute + "/tags/{tag}": Admin,
	"GET " + tableRoute + "/indexes": Read, "POST " + tableRoute + "/indexes": Admin,
	"POST " + tableRoute + "/compact": Admin, "POST " + tableRoute + "/gc": Admin, "GET " + tableRoute + "/compact/stats": Read,
	"POST " + tableRoute + "/lsm/flush": Append, "POST " + tableRoute + "/lsm/merge": Append,
	"POST " + tableRoute + "/lsm/compact": Append, "GET " + tableRoute + "/lsm/stats": Read,
}

const tableRoute = "/api/v1/tables/{name}"

// routeVerb is the verb a request on a table's route needs: the route's,
// and Write for an append that upserts or overwrites.
func routeVerb(pattern string, r *http.Request) Verb {
	v := tableRouteVerbs[pattern]
	if pattern == "POST "+tableRoute+"/rows" {
		if mode := r.URL.Query().Get("mode"); mode != "" && mode != "append" {
			v = Write
		}
	}
	return v
}

// OpenAPI is the OpenAPI 3.1 document of the server's routes, served at
// GET /api/v1/openapi.json.
//
//go:embed openapi.json
var OpenAPI []byte

// Routes are the patterns the server answers ("METHOD /path"), for checks
// against the OpenAPI document.
func (s *Server) Routes() []string { return slices.Clone(s.patterns) }

// notRouted answers a request no route takes: 405 with Allow when the
// path has routes for other methods, 404 otherwise, both as JSON errors;
// the mux's redirects (a path to clean) pass through.
func (s *Server) notRouted(w http.ResponseWriter, r *http.Request) {
	h, _ := s.mux.Handler(r)
	probe := &probeWriter{header: http.Header{}}
	h.ServeHTTP(probe, r)
	switch probe.status {
	case http.StatusMethodNotAllowed:
		allow := probe.header.Get("Allow")
		w.Header().Set("Allow", allow)
		writeError(w, http.StatusMethodNotAllowed, api.CodeMethodNotAllowed, fmt.Sprintf("%s %s: the route takes %s", r.Method, r.URL.Path, allow))
	case http.StatusNotFound:
		writeError(w, http.StatusNotFound, api.CodeNoRoute, fmt.Sprintf("no route %s %s", r.Method, r.URL.Path))
	default:
		h.ServeHTTP(w, r)
	}
}

// probeWriter records what a handler answers, dropping the body.
type probeWriter struct {
	header http.Header
	status int
}

func (p *probeWriter) Header() http.Header { return p.header }
func (p *probeWriter) WriteHeader(code int) {
	if p.status == 0 {
		p.status = code
	}
}
func (p *probeWriter) Write(b []byte) (int, error) {
	p.WriteHeader(http.StatusOK)
	return len(b), nil
}

// jsonBody refuses (415) a body declared as anything but JSON; a body
// without a Content-Type is taken as JSON.
func jsonBody(r *http.Request) error {
	if ct := mediaType(r); ct != "" && ct != api.JSON {
		return unsupportedMedia(api.JSON)
	}
	return nil
}

func mediaType(r *http.Request) string {
	mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	return mt
}

func badRequestOrLimit(err error, what string) error {
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return err
	}
	return badRequest("%s: %s", what, jsonWords(err))
}

// jsonWords says what a JSON body's decoding found wrong, in the server's
// words rather than encoding/json's: where the text is not JSON, which
// field holds a value of the wrong type and what it takes, an empty body.
func jsonWords(err error) string {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.Is(err, io.EOF):
		return "the body is empty"
	case errors.Is(err, io.ErrUnexpectedEOF):
		return "the body ends before its JSON does"
	case errors.As(err, &se):
		return fmt.Sprintf("not JSON at byte %d", se.Offset)
	case errors.As(err, &te):
		field := te.Field
		if field == "" {
			field = "the body"
		}
		want := te.Type.Kind().String()
		switch te.Type.Kind() {
		case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
			want = "an integer"
		case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
			want = "an integer from 0 up, within " + te.Type.Kind().String()
		case reflect.Float32, reflect.Float64:
			want = "a number"
		case reflect.String:
			want = "a string"
		case reflect.Bool:
			want = "true or false"
		case reflect.Struct, reflect.Map:
			want = "an object"
		case reflect.Slice, reflect.Array:
			want = "a list"
		}
		return fmt.Sprintf("%s is %s; want %s", field, te.Value, want)
	}
	return strings.TrimPrefix(err.Error(), "json: ")
}
