package server

import (
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/stratadb/strata/api"
	"github.com/stratadb/strata/engine"
	"github.com/stratadb/strata/table"
	"github.com/stratadb/strata/table/format"
)

// The Apache Iceberg REST catalog, under /iceberg: an engine's catalog URI
// is http://HOST:PORT/iceberg, and the spec's paths follow it
// (/iceberg/v1/config, /iceberg/v1/namespaces, …). It answers behind the
// server's bearer token, in the spec's error model
// ({"error": {"message", "type", "code"}}).
//
// Namespaces are the bucket's folders: the table at runs/eval/t is table t
// in namespace runs.eval (levels ["runs", "eval"]). A table at the
// bucket's root is in the namespace Options.IcebergRootNamespace
// (default "default"); a folder of that name is the same namespace, and
// where both hold a table of one name the folder's is the one served.
//
// Loading a table answers the table's Iceberg view (package lakehouse's
// export, under _iceberg/), brought up to date first when the table moved
// since it was written (see icebergload.go); a commit whose one change is
// an appended snapshot becomes a Strata append (icebergcommit.go). Every
// other change is refused.

// IcebergPrefix is where the catalog's routes begin.
const IcebergPrefix = "/iceberg"

// The spec's error types, by the status they go with.
const (
	icebergBadRequest     = "BadRequestException"
	icebergUnauthorized   = "NotAuthorizedException"
	icebergForbidden      = "ForbiddenException"
	icebergNoNamespace    = "NoSuchNamespaceException"
	icebergNoTable        = "NoSuchTableException"
	icebergUnsupported    = "UnsupportedOperationException"
	icebergCommitFailed   = "CommitFailedException"
	icebergUnavailable    = "ServiceUnavailableException"
	icebergServerError    = "ServerErrorException"
	icebergNotFound       = "NotFoundException"
	icebergTooLarge       = "RequestTooLargeException"
	icebergTooManyRequest = "TooManyRequestsException"
)

// icebergError is an answer of the catalog in the spec's error model.
type icebergError struct {
	status int
	typ    string
	msg    string
}

func (e *icebergError) Error() string { return e.msg }

func icebergErrorf(status int, typ, format string, args ...any) error {
	return &icebergError{status, typ, fmt.Sprintf(format, args...)}
}

// isIceberg says whether a request is the catalog's.
func isIceberg(r *http.Request) bool {
	return r.URL.Path == IcebergPrefix || strings.HasPrefix(r.URL.Path, IcebergPrefix+"/")
}

// writeIcebergError writes the spec's error body.
func writeIcebergError(w http.ResponseWriter, status int, typ, msg string) {
	writeJSON(w, status, map[string]any{"error": map[string]any{"message": msg, "type": typ, "code": status}})
}

// icebergTypeOf is the error type the spec gives a status.
func icebergTypeOf(status int) string {
	switch {
	case status == http.StatusBadRequest, status == http.StatusUnprocessableEntity, status == http.StatusRequestURITooLong:
		return icebergBadRequest
	case status == http.StatusUnauthorized:
		return icebergUnauthorized
	case status == http.StatusForbidden:
		return icebergForbidden
	case status == http.StatusNotFound:
		return icebergNotFound
	case status == http.StatusNotAcceptable, status == http.StatusMethodNotAllowed, status == http.StatusUnsupportedMediaType:
		return icebergUnsupported
	case status == http.StatusConflict:
		return icebergCommitFailed
	case status == http.StatusRequestEntityTooLarge:
		return icebergTooLarge
	case status == http.StatusTooManyRequests:
		return icebergTooManyRequest
	case status == http.StatusServiceUnavailable:
		return icebergUnavailable
	}
	return icebergServerError
}

// failIceberg writes err in the spec's error model: the catalog's own
// answers as they say, every other error by the status the rest of the
// API would give it.
func failIceberg(w http.ResponseWriter, err error) {
	var ie *icebergError
	var ae *apiError
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &ie):
		writeIcebergError(w, ie.status, ie.typ, ie.msg)
	case errors.As(err, &ae):
		if ae.status == http.StatusTooManyRequests {
			retryAfter(w, time.Second)
		}
		writeIcebergError(w, ae.status, icebergTypeOf(ae.status), ae.msg)
	case errors.As(err, &mbe):
		writeIcebergError(w, http.StatusRequestEntityTooLarge, icebergTooLarge, err.Error())
	case errors.Is(err, format.ErrNotFound):
		writeIcebergError(w, http.StatusNotFound, icebergNoTable, err.Error())
	default:
		status := api.Status(engine.Code(err))
		writeIcebergError(w, status, icebergTypeOf(status), err.Error())
	}
}

// icebergRoutes registers the catalog's routes. What the spec has and
// Strata does not do (create, drop, rename, namespaces' properties,
// views, transactions across tables) falls to the catch-all, which says
// what the catalog takes.
func (s *Server) icebergRoutes() {
	handle := func(pattern string, h func(w http.ResponseWriter, r *http.Request) error) {
		s.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
			if err := h(w, r); err != nil {
				if fault := bodyFault(r); fault != nil {
					err = fault
				}
				failIceberg(w, err)
			}
		})
	}
	const p = IcebergPrefix + "/v1"
	handle("GET "+p+"/config", s.icebergConfig)
	handle("GET "+p+"/namespaces", s.icebergNamespaces)
	handle("GET "+p+"/namespaces/{ns}", s.icebergNamespace)
	handle("HEAD "+p+"/namespaces/{ns}", s.icebergNamespace)
	handle("GET "+p+"/namespaces/{ns}/tables", s.icebergTables)
	handle("GET "+p+"/namespaces/{ns}/tables/{table}", s.icebergLoad)
	handle("HEAD "+p+"/namespaces/{ns}/tables/{table}", s.icebergLoad)
	handle("POST "+p+"/namespaces/{ns}/tables/{table}", s.icebergCommit)
	handle(IcebergPrefix+"/", func(w http.ResponseWriter, r *http.Request) error {
		return icebergErrorf(http.StatusNotAcceptable, icebergUnsupported,
			"%s %s: Strata's Iceberg catalog does not do this; it lists namespaces and tables, loads tables, and takes commits that append a snapshot (tables are created, altered and dropped with strata or its HTTP API)",
			r.Method, r.URL.Path)
	})
}

// icebergEndpoints are the routes GET /v1/config advertises, in the
// spec's form: an engine calls no other.
var icebergEndpoints = []string{
	"GET /v1/{prefix}/namespaces",
	"GET /v1/{prefix}/namespaces/{namespace}",
	"HEAD /v1/{prefix}/namespaces/{namespace}",
	"GET /v1/{prefix}/namespaces/{namespace}/tables",
	"GET /v1/{prefix}/namespaces/{namespace}/tables/{table}",
	"HEAD /v1/{prefix}/namespaces/{namespace}/tables/{table}",
	"POST /v1/{prefix}/namespaces/{namespace}/tables/{table}",
}

// icebergConfig answers GET /v1/config: no prefix, the endpoints served.
// The warehouse an engine names is not needed (the server has one
// bucket) and is not checked.
func (s *Server) icebergConfig(w http.ResponseWriter, r *http.Request) error {
	writeJSON(w, http.StatusOK, map[string]any{"defaults": map[string]string{}, "overrides": map[string]string{}, "endpoints": icebergEndpoints})
	return nil
}

// namespaceOf splits a namespace of the URL path: its levels joined by
// the unit separator (0x1F, sent as %1F).
func namespaceOf(r *http.Request) ([]string, error) {
	raw := r.PathValue("ns")
	levels := strings.Split(raw, "\x1f")
	for _, l := range levels {
		if l == "" || strings.Contains(l, "/") {
			return nil, icebergErrorf(http.StatusBadRequest, icebergBadRequest, "namespace %q has an empty level or one with a /: its levels are folders' names", raw)
		}
	}
	return levels, nil
}

// icebergName is a table's identifier in the catalog.
type icebergName struct {
	ns    []string
	table string
	path  string // the table's name under the server's bucket
}

// icebergNames lists every table under the server's bucket with its
// identifier, by namespace and then name; a root table whose identifier a
// folder's table has is left out (the folder's is served).
func (s *Server) icebergNames(r *http.Request) ([]icebergName, error) {
	root, err := s.opts.Open(r.Context(), s.opts.Bucket)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	tables, err := format.ListTables(r.Context(), root)
	if err != nil {
		return nil, err
	}
	// The catalog a token is shown holds the tables it sees: a table at
	// the root is shown in the root namespace unless the token sees one
	// of the same name in a folder of that name (whose existence a token
	// without a grant on it does not learn, here or in icebergTable).
	p := principalOf(r.Context())
	have := map[string]bool{}
	for _, t := range tables {
		have[t.Name] = p.seesTable(t.Name)
	}
	var out []icebergName
	for _, t := range tables {
		if t.Name == "" || !have[t.Name] {
			continue
		}
		segs := strings.Split(t.Name, "/")
		ns, name := segs[:len(segs)-1], segs[len(segs)-1]
		if len(ns) == 0 {
			if have[s.opts.IcebergRootNamespace+"/"+name] {
				continue
			}
			ns = []string{s.opts.IcebergRootNamespace}
		}
		out = append(out, icebergName{ns: ns, table: name, path: t.Name})
	}
	slices.SortFunc(out, func(a, b icebergName) int {
		if c := slices.Compare(a.ns, b.ns); c != 0 {
			return c
		}
		return strings.Compare(a.table, b.table)
	})
	return out, nil
}

// icebergNamespaces answers GET /v1/namespaces: the namespaces one level
// under parent= (the top level without it), each as its levels.
func (s *Server) icebergNamespaces(w http.ResponseWriter, r *http.Request) error {
	var parent []string
	if p := r.URL.Query().Get("parent"); p != "" {
		parent = strings.Split(p, "\x1f")
		if slices.Contains(parent, "") {
			return icebergErrorf(http.StatusBadRequest, icebergBadRequest, "parent namespace %q has an empty level", p)
		}
	}
	names, err := s.icebergNames(r)
	if err != nil {
		return err
	}
	seen := map[string]bool{}
	var found [][]string
	for _, n := range names {
		if len(n.ns) <= len(parent) || !slices.Equal(n.ns[:len(parent)], parent) {
			continue
		}
		child := n.ns[:len(parent)+1]
		if k := strings.Join(child, "\x1f"); !seen[k] {
			seen[k] = true
			found = append(found, slices.Clone(child))
		}
	}
	if parent != nil && len(found) == 0 && !slices.ContainsFunc(names, func(n icebergName) bool { return slices.Equal(n.ns, parent) }) {
		return icebergErrorf(http.StatusNotFound, icebergNoNamespace, "no namespace %s: no table lies under it", strings.Join(parent, "."))
	}
	page, next, err := pageOf(r, found, func(ns []string) string { return strings.Join(ns, "\x1f") })
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"namespaces": nonNil(page), "next-page-token": next})
	return nil
}

// icebergNamespace answers GET and HEAD /v1/namespaces/{ns}: a namespace
// exists while a table lies in it or under it. It has no properties.
func (s *Server) icebergNamespace(w http.ResponseWriter, r *http.Request) error {
	ns, _, err := s.namespaceTables(r)
	if err != nil {
		return err
	}
	if r.Method == http.MethodHead {
		w.WriteHeader(http.StatusNoContent)
		return nil
	}
	writeJSON(w, http.StatusOK, map[string]any{"namespace": ns, "properties": map[string]string{}})
	return nil
}

// icebergTables answers GET /v1/namespaces/{ns}/tables: the tables in the
// namespace itself, paged by pageSize= and pageToken=.
func (s *Server) icebergTables(w http.ResponseWriter, r *http.Request) error {
	ns, names, err := s.namespaceTables(r)
	if err != nil {
		return err
	}
	type ident struct {
		Namespace []string `json:"namespace"`
		Name      string   `json:"name"`
	}
	var found []ident
	for _, n := range names {
		if slices.Equal(n.ns, ns) {
			found = append(found, ident{n.ns, n.table})
		}
	}
	page, next, err := pageOf(r, found, func(i ident) string { return i.Name })
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"identifiers": nonNil(page), "next-page-token": next})
	return nil
}

// namespaceTables returns the namespace of the URL path and the tables in
// it or under it; a namespace no table lies under does not exist.
func (s *Server) namespaceTables(r *http.Request) ([]string, []icebergName, error) {
	ns, err := namespaceOf(r)
	if err != nil {
		return nil, nil, err
	}
	names, err := s.icebergNames(r)
	if err != nil {
		return nil, nil, err
	}
	names = slices.DeleteFunc(names, func(n icebergName) bool { return len(n.ns) < len(ns) || !slices.Equal(n.ns[:len(ns)], ns) })
	if len(names) == 0 {
		return nil, nil, icebergErrorf(http.StatusNotFound, icebergNoNamespace, "no namespace %s: no table lies under it", strings.Join(ns, "."))
	}
	return ns, names, nil
}

// pageOf cuts a sorted list by pageToken= (the key of the last item of
// the page before) and pageSize= (all when absent); the next token is
// null on the last page.
func pageOf[T any](r *http.Request, all []T, key func(T) string) ([]T, *string, error) {
	q := r.URL.Query()
	if tok := q.Get("pageToken"); tok != "" {
		after, err := base64.RawURLEncoding.DecodeString(tok)
		if err != nil {
			return nil, nil, icebergErrorf(http.StatusBadRequest, icebergBadRequest, "pageToken %q is not a token this catalog gave", tok)
		}
		i, _ := slices.BinarySearchFunc(all, string(after), func(t T, k string) int { return strings.Compare(key(t), k) })
		for i < len(all) && key(all[i]) <= string(after) {
			i++
		}
		all = all[i:]
	}
	size := len(all)
	if ps := q.Get("pageSize"); ps != "" {
		n, err := strconv.Atoi(ps)
		if err != nil || n < 1 {
			return nil, nil, icebergErrorf(http.StatusBadRequest, icebergBadRequest, "pageSize %q: want a whole number from 1", ps)
		}
		size = min(n, len(all))
	}
	var next *string
	if size < len(all) {
		tok := base64.RawURLEncoding.EncodeToString([]byte(key(all[size-1])))
		next = &tok
	}
	return all[:size], next, nil
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// icebergTable resolves the table an identifier names: the folder's
// table, or, in the root namespace, the root's, among the tables the
// request's token sees (as the catalog it is listed shows them), so that
// a token learns nothing of a table it has no grant on. The token needs
// the grant need on the table served, and is refused (403) when it has it
// on none of the names it may mean.
func (s *Server) icebergTable(r *http.Request, need Verb) (*tableState, error) {
	ns, err := namespaceOf(r)
	if err != nil {
		return nil, err
	}
	name := r.PathValue("table")
	if strings.Contains(name, "/") {
		return nil, icebergErrorf(http.StatusBadRequest, icebergBadRequest, "table name %q has a /: a table's folders are its namespace", name)
	}
	candidates := []string{strings.Join(ns, "/") + "/" + name}
	if len(ns) == 1 && ns[0] == s.opts.IcebergRootNamespace {
		candidates = append(candidates, name)
	}
	// Refused before looking when the token may use neither name; the
	// name is resolved as for any token, then the one served checked.
	p := principalOf(r.Context())
	if !slices.ContainsFunc(candidates, func(c string) bool { return p.allows(need, c) }) {
		return nil, p.refuse(need, candidates[0])
	}
	for i, c := range candidates {
		if format.CheckName(c) != nil || !p.seesTable(c) {
			continue
		}
		t, err := s.table(r.Context(), c, false)
		if err == nil && i+1 < len(candidates) {
			// The server may hold a table another process dropped since:
			// the root's table of the name is served then.
			_, err = table.LatestVersion(r.Context(), t.b)
		}
		if errors.Is(err, format.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if !p.allows(need, c) {
			return nil, p.refuse(need, c)
		}
		return t, nil
	}
	return nil, icebergErrorf(http.StatusNotFound, icebergNoTable, "no table %s.%s under the server's bucket", strings.Join(ns, "."), name)
}
