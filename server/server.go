// Package server offers Strata's tables over HTTP, for clients that are
// not Go: create, describe and drop tables, append rows (through the
// server's own WAL shard, acknowledged once durable), scan, take by key,
// versions and tags, compaction, and the LSM operations flush, merge and
// stats; and the Apache Iceberg REST catalog under /iceberg (iceberg.go),
// through which engines read every table live and append to it. Package
// client is its Go client.
//
// A table is a prefix of the server's bucket, named in the URL path. The
// shard a server writes through is derived from its instance id, so
// replicas behind a load balancer never share a shard. Invariants:
//
//   - An append is answered 200 only once its rows are durable in the
//     shard's WAL; any failure before that is an error status, and rows of
//     a failed append may or may not be stored (retry with new rows only
//     if duplicates are acceptable, or read first).
//   - Shutdown stops accepting, flushes and merges every shard it owns,
//     then returns: nothing acknowledged is left only in memory (and even
//     then it would be in the WAL).
//   - An engine's append through the catalog is one Strata commit, named
//     for idempotency: answered 200 only once it landed, and 500
//     (CommitStateUnknown), never a plain failure, when it landed but its
//     answer could not be made.
package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stratadb/strata/api"
	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/engine"
	"github.com/stratadb/strata/internal/telemetry"
	"github.com/stratadb/strata/table"
	"github.com/stratadb/strata/table/format"
)

// Options configure a Server. Zero values mean defaults.
type Options struct {
	// Bucket is the URL under which tables live: table NAME is at
	// Bucket/NAME.
	Bucket string
	// Instance names this server (default: the hostname); its shard is
	// "srv-" + Instance.
	Instance string
	// DropWait is how long a drop waits between fencing the table's
	// shards and deleting its objects, when another process owns one
	// (default engine.DropWait; negative: no wait, for tests whose
	// writers are all in the process).
	DropWait time.Duration
	// Token, when set, is required as "Authorization: Bearer TOKEN" —
	// of every route but /healthz, and /metrics with OpenMetrics (for a
	// Prometheus that scrapes by pod annotation, without the token; the
	// metrics hold no row and no table's data, only counts and names).
	Token string
	// Tokens, when set, holds further tokens, each with its grants (see
	// Verb): the server then refuses a request outside its token's
	// grants (403).
	Tokens      *Tokens
	OpenMetrics bool
	// MaxBodyBytes bounds a request body (default 64 MiB).
	MaxBodyBytes int64
	// MemoryBudget bounds what requests that hold data (appends, scans,
	// takes) may hold at once (default 1 GiB); past it, requests wait up
	// to BusyWait (default 2s), then get 429. WriteShare of it (default a
	// quarter) is for writes alone — appends and creates with rows — so
	// that readers cannot starve writers; reads share the rest (see
	// budget). The memtables of the server's shards are bounded apart
	// (Shard.MaxMemtableBytes).
	MemoryBudget int64
	WriteShare   int64
	BusyWait     time.Duration
	// MaxTakeKeys bounds the keys of one take (default 20,000).
	MaxTakeKeys int
	// A request body must keep arriving: after BodyGrace (default 10s), at
	// MinBodyRate bytes a second on average (default 64 KiB/s), or 408.
	BodyGrace   time.Duration
	MinBodyRate int64
	// Shard tunes the server's WAL shards (its Shard field is set here).
	Shard engine.ShardOptions
	// Compaction is the policy of POST /compact (its minimum is ignored:
	// an operator asked).
	Compaction engine.Policy
	// LeaseTTL: how long the table's compaction lease, which POST
	// …/compact takes, holds before another compactor may break it; it is
	// renewed while the compaction runs (default 30m, as the Job's).
	LeaseTTL time.Duration
	Log      *slog.Logger
	// IcebergExport writes a table's Iceberg view for the catalog under
	// /iceberg (nil: the catalog answers loads of tables whose view is not
	// up to date 503); IcebergRootNamespace is the namespace of the
	// tables at the bucket's root (default "default").
	IcebergExport        IcebergExport
	IcebergRootNamespace string
	// Open opens bucket URLs (default blob.Open); tests wrap it.
	Open func(ctx context.Context, url string) (blob.Bucket, error)
}

// Server serves the API. Create it with New.
type Server struct {
	opts     Options
	mux      *http.ServeMux
	metrics  *metrics
	patterns []string // the routes, as registered
	budget   *budget
	exports  chan struct{} // the Iceberg exports running (maxExports)
	draining atomic.Bool
	mu       struct {
		sync.Mutex
		tables map[string]*tableState
	}
}

type tableState struct {
	name string
	// label: the table's metrics label, its path under the bucket
	// (telemetry.TableLabel), as the Job's series name it.
	label string
	b     blob.Bucket
	// db owns the table's life in this server: its shard (opened on the
	// first append, flush or merge, and again once a newer owner fenced
	// it), its background work (compaction, flush, merge; dropping the
	// table or shutting the server down ends it and waits for it), and
	// the bucket (closed with it).
	db *engine.DB
	// view is the table's Iceberg view as the catalog last read it.
	view icebergView
	// job is what was read last of the compactor Job's history (at most
	// once a minute: a LIST and a GET), for /metrics (see adopted).
	job struct {
		sync.Mutex
		adopted   int64
		ok        bool
		kinds     map[string]engine.KindStatus // each kind's newest recorded run
		consumers []consumerLag                // the named consumers, as last read
		readAt    time.Time                    // the last read ended
		reading   bool
	}
}

// ErrInvalidOptions: an option out of its range, or options that break a
// relation their documentation states (see Options.Validate).
var ErrInvalidOptions = errors.New("server: invalid options")

// EnsureDefaults returns a copy of o (nil: the zero Options) with every
// unset field at its default. o itself is not changed.
func (o *Options) EnsureDefaults() *Options {
	var c Options
	if o != nil {
		c = *o
	}
	if c.MaxBodyBytes <= 0 {
		c.MaxBodyBytes = 64 << 20
	}
	if c.MemoryBudget <= 0 {
		c.MemoryBudget = 1 << 30
	}
	if c.WriteShare <= 0 {
		c.WriteShare = c.MemoryBudget / 4
	}
	if c.BusyWait <= 0 {
		c.BusyWait = 2 * time.Second
	}
	if c.MaxTakeKeys <= 0 {
		c.MaxTakeKeys = 20_000
	}
	if c.BodyGrace <= 0 {
		c.BodyGrace = 10 * time.Second
	}
	if c.MinBodyRate <= 0 {
		c.MinBodyRate = 64 << 10
	}
	if c.LeaseTTL <= 0 {
		c.LeaseTTL = engine.DefaultLeaseTTL
	}
	if c.Log == nil {
		c.Log = slog.Default()
	}
	if c.Open == nil {
		c.Open = blob.Open
	}
	if c.IcebergRootNamespace == "" {
		c.IcebergRootNamespace = "default"
	}
	return &c
}

// Validate checks the options as EnsureDefaults leaves them: a bucket and
// an instance id that makes a valid shard id, no negative limits, a lease
// of at least engine.MinLeaseTTL (it is renewed every third of it), a
// write share of at most half the memory budget, and valid shard options
// and compaction policy. (A body over MemoryBudget is allowed: it is
// admitted alone, holding the whole of its part.)
func (o *Options) Validate() error {
	if o == nil || o.Bucket == "" {
		return fmt.Errorf("%w: no bucket URL", ErrInvalidOptions)
	}
	if o.Instance == "" {
		return fmt.Errorf("%w: no instance id", ErrInvalidOptions)
	}
	if err := engine.CheckShardID("srv-" + o.Instance); err != nil {
		return fmt.Errorf("%w: instance id %q: %w", ErrInvalidOptions, o.Instance, err)
	}
	if err := CheckToken(o.Token); err != nil {
		return fmt.Errorf("%w: Token: %w", ErrInvalidOptions, err)
	}
	if ns := o.IcebergRootNamespace; ns != "" && (strings.Contains(ns, "/") || format.CheckName(ns) != nil) {
		return fmt.Errorf("%w: IcebergRootNamespace %q: a namespace of one level, a name's segment (1 to 128 of A-Z a-z 0-9 . _ -, not beginning with .)", ErrInvalidOptions, ns)
	}
	if o.MaxBodyBytes < 0 || o.MemoryBudget < 0 || o.WriteShare < 0 || o.BusyWait < 0 || o.MaxTakeKeys < 0 || o.BodyGrace < 0 || o.MinBodyRate < 0 || o.LeaseTTL < 0 {
		return fmt.Errorf("%w: limits must not be negative", ErrInvalidOptions)
	}
	c := o.EnsureDefaults()
	if c.WriteShare > c.MemoryBudget/2 {
		return fmt.Errorf("%w: WriteShare %d is over half the MemoryBudget %d: reads would be left less than writes", ErrInvalidOptions, c.WriteShare, c.MemoryBudget)
	}
	if c.LeaseTTL < engine.MinLeaseTTL {
		return fmt.Errorf("%w: LeaseTTL %v is below %v", ErrInvalidOptions, c.LeaseTTL, engine.MinLeaseTTL)
	}
	sh := c.Shard
	sh.Shard = "srv-" + c.Instance
	if err := sh.Validate(); err != nil {
		return fmt.Errorf("server: Shard: %w", err)
	}
	return c.Compaction.Validate()
}

// New makes a server. It opens nothing until a request needs it.
func New(o *Options) (*Server, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	opts := *o.EnsureDefaults()
	s := &Server{opts: opts, mux: http.NewServeMux(), budget: newBudget(opts.MemoryBudget, opts.WriteShare, opts.BusyWait)}
	s.metrics = newMetrics(s)
	s.exports = make(chan struct{}, maxExports)
	s.mu.tables = map[string]*tableState{}
	if err := s.routes(); err != nil {
		return nil, err
	}
	s.icebergRoutes()
	return s, nil
}

// ShardID is the shard this server writes through.
func (s *Server) ShardID() string { return "srv-" + s.opts.Instance }

// Handler returns the HTTP handler: authentication, draining, body limits
// and metrics around the routes. Served by HTTPServer on a Listener, it
// also refuses requests whose framing is ambiguous (see Listener).
func (s *Server) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		id := requestID(r)
		w.Header().Set("X-Request-Id", id)
		who := "" // the name of the request's token, never the token
		defer func() {
			d := time.Since(start)
			s.metrics.observe(r.Pattern, rw.status, d)
			level := slog.LevelInfo
			if r.URL.Path == "/healthz" || r.URL.Path == "/metrics" {
				level = slog.LevelDebug
			}
			s.opts.Log.LogAttrs(context.Background(), level, "request", slog.String("request_id", id),
				slog.String("method", r.Method), slog.String("path", r.URL.Path), slog.String("route", r.Pattern),
				slog.Int("status", rw.status), slog.Int64("bytes", rw.bytes), slog.Float64("duration_s", d.Seconds()),
				slog.String("remote", r.RemoteAddr), slog.String("token", who))
		}()
		// The catalog's routes answer in the Iceberg spec's error model.
		writeError := writeError
		if isIceberg(r) {
			writeError = func(w http.ResponseWriter, status int, _, msg string) {
				writeIcebergError(w, status, icebergTypeOf(status), msg)
			}
		}
		if !checkFraming(rw, r, writeError) {
			return
		}
		if n := len(r.RequestURI); n > MaxURLBytes {
			writeError(rw, http.StatusRequestURITooLong, api.CodeTooLarge, fmt.Sprintf(
				"the URL is %d bytes; at most %d (a longer filter= or columns= cannot be sent: split the request, e.g. an IN list across several)", n, MaxURLBytes))
			return
		}
		if r.URL.Path != "/healthz" && !(r.URL.Path == "/metrics" && s.opts.OpenMetrics) {
			p, ok, why := s.authenticate(r)
			if !ok {
				challenge := `Bearer realm="strata"`
				if auth := r.Header.Get("Authorization"); len(auth) > 7 && strings.EqualFold(auth[:7], "Bearer ") {
					challenge += `, error="invalid_token"`
				}
				rw.Header().Set("WWW-Authenticate", challenge)
				writeError(rw, http.StatusUnauthorized, api.CodeUnauthorized, why)
				return
			}
			if p != nil {
				who = p.name
				r = r.WithContext(context.WithValue(r.Context(), principalKey{}, p))
			}
		}
		if s.draining.Load() && r.URL.Path != "/healthz" && r.URL.Path != "/metrics" {
			writeError(rw, http.StatusServiceUnavailable, api.CodeDraining, "the server is shutting down")
			return
		}
		if r.ContentLength > s.opts.MaxBodyBytes {
			writeError(rw, http.StatusRequestEntityTooLarge, api.CodeTooLarge,
				fmt.Sprintf("the body is %d bytes, over the limit of %d", r.ContentLength, s.opts.MaxBodyBytes))
			return
		}
		if r.Body != nil && r.Body != http.NoBody {
			pb := &pacedBody{ReadCloser: r.Body, rc: http.NewResponseController(rw), start: time.Now(),
				grace: s.opts.BodyGrace, rate: s.opts.MinBodyRate}
			r.Body = http.MaxBytesReader(rw, pb, s.opts.MaxBodyBytes)
			r = r.WithContext(context.WithValue(r.Context(), paceKey{}, pb))
		}
		if _, pattern := s.mux.Handler(r); pattern == "" {
			s.notRouted(rw, r)
			return
		}
		s.mux.ServeHTTP(rw, r)
	})
}

type statusWriter struct {
	http.ResponseWriter
	status int
	wrote  bool
	bytes  int64
}

// requestID is the client's X-Request-Id when it is a plain token of at
// most 64 characters, or a fresh one.
func requestID(r *http.Request) string {
	if id := r.Header.Get("X-Request-Id"); id != "" && len(id) <= 64 && requestIDChars.MatchString(id) {
		return id
	}
	return format.NewID()
}

var requestIDChars = regexp.MustCompile(`^[A-Za-z0-9._:-]+$`)

func (w *statusWriter) WriteHeader(code int) {
	if !w.wrote {
		w.status, w.wrote = code, true
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(p []byte) (int, error) {
	w.wrote = true
	n, err := w.ResponseWriter.Write(p)
	w.bytes += int64(n)
	return n, err
}

// Unwrap lets http.ResponseController reach the connection.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// table returns the state of table name, opening its bucket on first use.
// Only tables that exist (or are being created) are kept, so requests for
// made-up names cannot grow the server's memory.
func (s *Server) table(ctx context.Context, name string, create bool) (*tableState, error) {
	// A name is a path under the server's bucket ("runs/eval": the
	// client escapes its "/" as %2F), checked by the format's rule.
	if err := format.CheckName(name); err != nil {
		return nil, &apiError{http.StatusBadRequest, api.CodeBadTableName, err.Error()}
	}
	s.mu.Lock()
	t, ok := s.mu.tables[name]
	s.mu.Unlock()
	if ok {
		return t, nil
	}
	b, err := s.opts.Open(ctx, blob.JoinURL(s.opts.Bucket, name))
	if err != nil {
		return nil, err
	}
	if !create {
		if _, err := table.LatestVersion(ctx, b); err != nil {
			b.Close()
			return nil, err
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if t, ok := s.mu.tables[name]; ok { // another request opened it meanwhile
		b.Close()
		return t, nil
	}
	t = &tableState{name: name, label: telemetry.TableLabel(blob.JoinURL(s.opts.Bucket, name)), b: b,
		view: icebergView{turn: make(chan struct{}, 1)}}
	s.metrics.observeStore(b)
	db, err := engine.OpenNew(b, s.engineOptions(name))
	if err != nil {
		b.Close()
		return nil, err
	}
	t.db = db
	s.mu.tables[name] = t
	return t, nil
}

// engineOptions are the options of a table's engine handle.
func (s *Server) engineOptions(name string) *engine.Options {
	o := &engine.Options{Name: name, Writer: "server:" + s.opts.Instance, Shard: s.opts.Shard,
		MergeInterval: s.opts.Shard.MergeInterval, FleetMerge: s.opts.Shard.FleetMerge,
		Policy: s.opts.Compaction, LeaseTTL: s.opts.LeaseTTL, Log: s.opts.Log, CloseBucket: true,
		Listener: engine.Tee(engine.LoggingListener(s.opts.Log), s.metrics.listener())}
	o.Shard.Shard = s.ShardID()
	return o
}

// forgetIfMissing closes and forgets a table that a failed create left
// open but that does not exist, so that it has no metrics and no handle.
func (s *Server) forgetIfMissing(t *tableState) {
	if _, err := table.LatestVersion(context.Background(), t.b); !errors.Is(err, format.ErrNotFound) {
		return
	}
	s.mu.Lock()
	if s.mu.tables[t.name] == t && t.db.OpenShard() == nil {
		delete(s.mu.tables, t.name)
		s.mu.Unlock()
		if err := t.db.Close(); err != nil {
			s.opts.Log.Warn("closing the handle of a table that a failed create left open", "table", t.name, "error", err.Error())
		}
		return
	}
	s.mu.Unlock()
}

// Shutdown drains: requests other than health and metrics get 503, then
// every open shard is flushed and merged and closed. Stop the listener
// first (http.Server.Shutdown), then call this.
func (s *Server) Shutdown(ctx context.Context) error {
	s.draining.Store(true)
	s.mu.Lock()
	tables := make([]*tableState, 0, len(s.mu.tables))
	for _, t := range s.mu.tables {
		tables = append(tables, t)
	}
	s.mu.Unlock()
	var errs []error
	for _, t := range tables {
		if err := t.db.Drain(ctx); err != nil {
			errs = append(errs, fmt.Errorf("%s: flush and merge: %w", t.name, err))
		}
		if err := t.db.Close(); err != nil {
			errs = append(errs, fmt.Errorf("%s: close: %w", t.name, err))
		}
	}
	return errors.Join(errs...)
}

// apiError is an error with its HTTP status and code.
type apiError struct {
	status int
	code   string
	msg    string
}

func (e *apiError) Error() string { return e.msg }

func writeError(w http.ResponseWriter, status int, code, msg string) {
	body := api.ErrorBody{Error: api.ErrorDetail{Code: code, Message: msg}}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(body)
}

// CheckToken refuses a bearer token no client can send: one of blanks
// only, or with blanks at an end (HTTP drops them from a header's value).
// "" is no token.
func CheckToken(token string) error {
	switch {
	case token == "":
		return nil
	case strings.TrimSpace(token) == "":
		return errors.New("the token is blank (whitespace only): give a token a client can send, or none")
	case strings.TrimSpace(token) != token:
		return errors.New("the token begins or ends with whitespace, which HTTP drops from the Authorization header: no client could send it")
	}
	return nil
}

// fail maps an error to its status and writes it: the server's own
// answers (apiError, a body over its limit) as they say, every other
// error by its code (engine.Code) and that code's status (api.Status).
func fail(w http.ResponseWriter, err error) {
	var ae *apiError
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &ae):
		if ae.status == http.StatusTooManyRequests {
			retryAfter(w, time.Second)
		}
		if ae.code == api.CodeBadFraming {
			// Where the next request on the connection starts is unknown.
			w.Header().Set("Connection", "close")
		}
		writeError(w, ae.status, ae.code, ae.msg)
	case errors.As(err, &mbe):
		writeError(w, http.StatusRequestEntityTooLarge, api.CodeTooLarge, err.Error())
	case errors.Is(err, engine.ErrSchemaChanged):
		// The clients send the rows again; the shard has opened under the
		// new schema by then, and refuses a column it took away by name.
		writeError(w, http.StatusServiceUnavailable, api.CodeUnavailable,
			"the table's schema changed since this server opened its shard; nothing was stored; send the rows again ("+err.Error()+")")
	default:
		code := engine.Code(err)
		writeError(w, api.Status(code), code, err.Error())
	}
}

// unsupportedMedia is the 415 for a Content-Type a route does not take.
func unsupportedMedia(types ...string) error {
	return &apiError{http.StatusUnsupportedMediaType, api.CodeUnsupportedMediaType, "Content-Type must be " + strings.Join(types, " or ")}
}

func badRequest(format string, args ...any) error {
	return &apiError{http.StatusBadRequest, api.CodeBadRequest, fmt.Sprintf(format, args...)}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
