// Package client is the Go client of Strata's HTTP server (package
// server): every route, typed errors, and retries of 429 and 503 answers
// with backoff, a bounded number of times.
//
// Requests that carry rows (Append, AppendJSONLines, CreateTable) are
// named (see api.HeaderProducer), so that sending one again stores
// nothing twice: a request takes a lane — a producer with a random
// identity, which numbers its requests — for as long as it runs, so that
// each lane has one request at a time and a request sent again is always
// its lane's newest (the server keeps a few numbers per producer). A
// client has as many lanes as it ever ran requests with rows at once. Such a request is retried after any failure to learn its
// outcome — a lost connection, a timeout, 429, 502, 503, 504,
// outcome_unknown —
// for up to Options.RetryFor, with the same name. AppendOnce names an
// append with a key of the caller's, for retries across the caller's own
// restarts.
package client

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"math"
	mrand "math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/stratadb/strata/api"
	"github.com/stratadb/strata/internal/backoff"
	"github.com/stratadb/strata/internal/ipcguard"
)

// Error is an error answer of the server.
type Error struct {
	Status  int
	Code    string
	Message string
}

func (e *Error) Error() string {
	return fmt.Sprintf("strata server: %d %s: %s", e.Status, e.Code, e.Message)
}

// IsStatus reports whether err is an answer with that status.
func IsStatus(err error, status int) bool {
	var e *Error
	return errors.As(err, &e) && e.Status == status
}

// IsCode reports whether err is an answer with that error code (the
// api.Code… constants).
func IsCode(err error, code string) bool {
	var e *Error
	return errors.As(err, &e) && e.Code == code
}

// Client talks to one server.
type Client struct {
	base string
	opts Options
	// lanes name the client's requests with rows (see the package doc):
	// the free ones.
	lanes struct {
		sync.Mutex
		free []*lane
	}
	// written is what the client's appends through shards were
	// acknowledged at: by table, each shard's newest WAL position. Reads
	// name it (see written), so that they hold the client's own writes.
	written struct {
		sync.Mutex
		by map[string]map[string]uint64
	}
}

// lane is a producer of requests with rows: one request at a time.
type lane struct {
	producer string
	seq      uint64
}

// Options configure a Client. A nil *Options, or a zero field, means the
// default.
type Options struct {
	// Token is sent as "Authorization: Bearer TOKEN" when set.
	Token string
	// Retries bounds the retries of a 429 or 503 answer (default 5; -1:
	// none; a 503 outcome_unknown is never retried). Between them the
	// client backs off, jittered, from BaseBackoff (default 10ms) doubling
	// up to MaxBackoff (default 2.5s); an answer with Retry-After (the
	// server's memory budget is held) waits what it asks, and up to half
	// again, jittered, unless that would end past RetryFor: then its
	// error is the answer.
	Retries                 int
	BaseBackoff, MaxBackoff time.Duration
	// RetryFor: how long a named request (one with rows) is sent again
	// after failures that leave its outcome unknown (default 30s; the
	// name makes it safe). NoNames sends requests with rows unnamed, as
	// clients before names did: then a failure is the caller's to judge.
	RetryFor time.Duration
	NoNames  bool
	// HTTP is the HTTP client (default: a new http.Client, with TLS when
	// set). TLS configures the client of an https:// server (TLSConfig
	// makes one from files); it and HTTP are not set together.
	HTTP *http.Client
	TLS  *tls.Config
	// MaxMessageBytes bounds the body of one Arrow IPC message (a batch)
	// of the server's answers (default 1 GiB): a message claiming more is
	// refused before any memory is allocated for it.
	MaxMessageBytes int64
	// IgnoreOwnWrites makes Scan and Describe read the latest version as
	// it is, without the rows this client appended through the server's
	// shards and the merge has not installed yet (which they hold by
	// default: see api.AppendResult).
	IgnoreOwnWrites bool
}

// maxAnswerMetadata bounds the metadata of one Arrow IPC message of an
// answer, as the server bounds it in what it is sent.
const maxAnswerMetadata = 4 << 20

// ErrInvalidOptions: an option out of its range (see Options.Validate).
var ErrInvalidOptions = errors.New("client: invalid options")

// EnsureDefaults returns a copy of o (nil: the zero Options) with every
// unset field at its default. o itself is not changed.
func (o *Options) EnsureDefaults() *Options {
	var c Options
	if o != nil {
		c = *o
	}
	switch {
	case c.Retries == 0:
		c.Retries = 5
	case c.Retries < 0:
		c.Retries = 0
	}
	if c.BaseBackoff <= 0 {
		c.BaseBackoff = 10 * time.Millisecond
	}
	if c.MaxBackoff <= 0 {
		c.MaxBackoff = 2560 * time.Millisecond
	}
	c.HTTP = httpClient(&c)
	if c.RetryFor <= 0 {
		c.RetryFor = 30 * time.Second
	}
	if c.MaxMessageBytes <= 0 {
		c.MaxMessageBytes = 1 << 30
	}
	return &c
}

// Validate checks the options: BaseBackoff at most MaxBackoff, neither
// negative.
func (o *Options) Validate() error {
	if o == nil {
		return nil
	}
	if o.HTTP != nil && o.TLS != nil {
		return fmt.Errorf("%w: HTTP and TLS are set together: give the HTTP client's transport the TLS configuration", ErrInvalidOptions)
	}
	if o.BaseBackoff < 0 || o.MaxBackoff < 0 || o.RetryFor < 0 {
		return fmt.Errorf("%w: BaseBackoff, MaxBackoff and RetryFor must not be negative", ErrInvalidOptions)
	}
	if c := o.EnsureDefaults(); c.BaseBackoff > c.MaxBackoff {
		return fmt.Errorf("%w: BaseBackoff %v is above MaxBackoff %v", ErrInvalidOptions, c.BaseBackoff, c.MaxBackoff)
	}
	return nil
}

// New returns a client of the server at base ("http://127.0.0.1:8080").
func New(base string, opts *Options) (*Client, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("%w: server address %q: want http://HOST:PORT or https://HOST", ErrInvalidOptions, base)
	}
	return &Client{base: strings.TrimSuffix(base, "/"), opts: *opts.EnsureDefaults()}, nil
}

func (c *Client) url(name, path string, q url.Values) string {
	u := c.base + "/api/v1/tables/" + url.PathEscape(name) + path
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	return u
}

// do sends a request, retrying 429 and 503 with jittered backoff; body
// is a function so it can be sent again. A request with a name (headers
// that make sending it again safe) is also retried after a transport
// error and an outcome_unknown answer, for up to RetryFor.
func (c *Client) do(ctx context.Context, method, u, ctype string, body func() io.Reader, accept string, name http.Header) (*http.Response, error) {
	start := time.Now()
	for attempt := 0; ; attempt++ {
		var rd io.Reader
		if body != nil {
			rd = body()
		}
		req, err := http.NewRequestWithContext(ctx, method, u, rd)
		if err != nil {
			return nil, err
		}
		if ctype != "" {
			req.Header.Set("Content-Type", ctype)
		}
		if accept != "" {
			req.Header.Set("Accept", accept)
		}
		if c.opts.Token != "" {
			req.Header.Set("Authorization", "Bearer "+c.opts.Token)
		}
		for k, v := range name {
			req.Header[k] = v
		}
		resp, err := c.opts.HTTP.Do(req)
		refused := tlsFailure(err)
		retry, wait := false, backoff.Policy{Base: c.opts.BaseBackoff, Max: c.opts.MaxBackoff}.Delay(attempt+1)
		switch {
		case refused != nil:
			return nil, refused // it would fail again
		case err != nil:
			// The request may or may not have reached the server.
			retry = name != nil && ctx.Err() == nil && time.Since(start) < c.opts.RetryFor
		case resp.StatusCode < 400:
			return resp, nil
		default:
			err = readError(resp)
			busy := resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusServiceUnavailable
			if name != nil {
				// And a proxy's answer for a server that did not answer it.
				gateway := resp.StatusCode == http.StatusBadGateway || resp.StatusCode == http.StatusGatewayTimeout
				retry = (busy || gateway) && time.Since(start) < c.opts.RetryFor
			} else {
				// Sent again unnamed, rows answered outcome_unknown may be
				// stored twice.
				retry = busy && attempt < c.opts.Retries && !IsCode(err, api.CodeOutcomeUnknown)
			}
			if d, ok := retryAfter(resp.Header, time.Now()); ok && retry {
				// The server said when to come back: not before, and not
				// past the time this request may take.
				wait = d + mrand.N(d/2+1)
				retry = time.Since(start)+d <= c.opts.RetryFor
			}
		}
		if !retry {
			return nil, err
		}
		if err := backoff.Sleep(ctx, wait); err != nil {
			return nil, err
		}
	}
}

// retryAfter reads a Retry-After header (RFC 9110: seconds, or an HTTP
// date) as the wait it asks for from now.
func retryAfter(h http.Header, now time.Time) (time.Duration, bool) {
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0, false
	}
	if s, err := strconv.ParseUint(v, 10, 32); err == nil {
		return time.Duration(s) * time.Second, true
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(t.Sub(now), 0), true
	}
	return 0, false
}

// newProducer is a client's random identity as a producer of requests.
func newProducer() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// nextName names a request with rows, on a lane of its own until done is
// called (nil, and a no-op: NoNames).
func (c *Client) nextName() (name http.Header, done func()) {
	if c.opts.NoNames {
		return nil, func() {}
	}
	c.lanes.Lock()
	var l *lane
	if n := len(c.lanes.free); n > 0 {
		l, c.lanes.free = c.lanes.free[n-1], c.lanes.free[:n-1]
	} else {
		l = &lane{producer: newProducer()}
	}
	c.lanes.Unlock()
	l.seq++
	return http.Header{api.HeaderProducer: {l.producer}, api.HeaderSequence: {strconv.FormatUint(l.seq, 10)}}, func() {
		c.lanes.Lock()
		c.lanes.free = append(c.lanes.free, l)
		c.lanes.Unlock()
	}
}

func readError(resp *http.Response) error {
	defer resp.Body.Close()
	var body api.ErrorBody
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if json.Unmarshal(data, &body) != nil || body.Error.Code == "" {
		return &Error{Status: resp.StatusCode, Code: "http", Message: strings.TrimSpace(string(data))}
	}
	return &Error{Status: resp.StatusCode, Code: body.Error.Code, Message: body.Error.Message}
}

// reply is a response, or the error that stands for it.
type reply struct {
	resp    *http.Response
	err     error
	maxBody int64 // of an Arrow IPC message (Options.MaxMessageBytes)
}

func (c *Client) call(ctx context.Context, method, u, ctype string, body func() io.Reader, accept string) reply {
	return c.callNamed(ctx, method, u, ctype, body, accept, nil)
}

// callNamed is call for a request with a name (nil: none).
func (c *Client) callNamed(ctx context.Context, method, u, ctype string, body func() io.Reader, accept string, name http.Header) reply {
	resp, err := c.do(ctx, method, u, ctype, body, accept, name)
	return reply{resp, err, c.opts.MaxMessageBytes}
}

// none drains and closes a response whose body does not matter (202,
// 204: there is none to decode).
func (r reply) none() error {
	if r.err != nil {
		return r.err
	}
	_, _ = io.Copy(io.Discard, r.resp.Body)
	return r.resp.Body.Close()
}

func (r reply) json(v any) error {
	if r.err != nil {
		return r.err
	}
	defer r.resp.Body.Close()
	return json.NewDecoder(r.resp.Body).Decode(v)
}

func jsonBody(v any) (func() io.Reader, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return func() io.Reader { return bytes.NewReader(data) }, nil
}

func ipcBody(schema *arrow.Schema, batches []arrow.RecordBatch) (func() io.Reader, error) {
	var buf bytes.Buffer
	w := ipc.NewWriter(&buf, ipc.WithSchema(schema))
	for _, rec := range batches {
		if err := w.Write(rec); err != nil {
			return nil, err
		}
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	data := buf.Bytes()
	return func() io.Reader { return bytes.NewReader(data) }, nil
}

// CreateTable creates a table with schema and, optionally, initial rows.
func (c *Client) CreateTable(ctx context.Context, name string, schema *arrow.Schema, batches ...arrow.RecordBatch) (api.TableInfo, error) {
	body, err := ipcBody(schema, batches)
	if err != nil {
		return api.TableInfo{}, err
	}
	var info api.TableInfo
	reqName, done := c.nextName()
	defer done()
	return info, c.callNamed(ctx, http.MethodPut, c.url(name, "", nil), api.ArrowStream, body, "", reqName).json(&info)
}

// Describe returns the table's schema, version and size; its rows count
// this client's own appends not merged yet too (see ScanOptions).
func (c *Client) Describe(ctx context.Context, name string) (api.TableInfo, error) {
	var info api.TableInfo
	q := url.Values{}
	c.ownWrites(name, q)
	return info, c.call(ctx, http.MethodGet, c.url(name, "", q), "", nil, "").json(&info)
}

// Drop deletes the table and every object in it.
func (c *Client) Drop(ctx context.Context, name string) error {
	c.forget(name)
	return c.call(ctx, http.MethodDelete, c.url(name, "", nil), "", nil, "").none()
}

// Append appends batches, all or none; it returns once the server has
// them durable, having sent them again under the same name as long as it
// could not tell (see the package doc).
func (c *Client) Append(ctx context.Context, name string, batches ...arrow.RecordBatch) (int64, error) {
	reqName, done := c.nextName()
	defer done()
	res, err := c.appendNamed(ctx, name, reqName, batches)
	return res.Rows, err
}

// AppendOnce is Append named by key, a key of the caller's (at most
// api.MaxIdempotencyKeyBytes, 252 bytes): sent again with the same key — by this client, or by another
// after the caller restarted — it stores nothing and answers the first
// append's outcome (Duplicate set). The same key with other rows is
// refused (IsCode(err, api.CodeKeyReused)). The server remembers a key
// for an hour, and at most 1,000 keys per shard.
func (c *Client) AppendOnce(ctx context.Context, name, key string, batches ...arrow.RecordBatch) (api.AppendResult, error) {
	return c.appendNamed(ctx, name, http.Header{api.HeaderIdempotencyKey: {key}}, batches)
}

func (c *Client) appendNamed(ctx context.Context, name string, reqName http.Header, batches []arrow.RecordBatch) (api.AppendResult, error) {
	return c.postRows(ctx, name, nil, reqName, batches)
}

// postRows sends batches to POST …/rows as Arrow IPC, with query q and the
// request's name (nil: none; one makes sending it again safe).
func (c *Client) postRows(ctx context.Context, name string, q url.Values, reqName http.Header, batches []arrow.RecordBatch) (api.AppendResult, error) {
	var out api.AppendResult
	if len(batches) == 0 {
		return out, nil
	}
	body, err := ipcBody(batches[0].Schema(), batches)
	if err != nil {
		return out, err
	}
	err = c.callNamed(ctx, http.MethodPost, c.url(name, "/rows", q), api.ArrowStream, body, "", reqName).json(&out)
	c.wrote(name, out)
	return out, err
}

// AppendJSONLines appends rows given as JSON lines, one object a row, all
// or nothing; it returns once the server has them durable (named as
// Append's are).
func (c *Client) AppendJSONLines(ctx context.Context, name string, lines []byte) (int64, error) {
	var out api.AppendResult
	body := func() io.Reader { return bytes.NewReader(lines) }
	reqName, done := c.nextName()
	defer done()
	err := c.callNamed(ctx, http.MethodPost, c.url(name, "/rows", nil), api.NDJSON, body, "", reqName).json(&out)
	c.wrote(name, out)
	return out.Rows, err
}

// stream yields the batches of an Arrow IPC answer.
func (r reply) stream(yield func(arrow.RecordBatch, error) bool) {
	if r.err != nil {
		yield(nil, r.err)
		return
	}
	defer r.resp.Body.Close()
	// Read through the guard: arrow-go's reader allocates what a message
	// claims before it reads it, and a claim it cannot meet (a body of
	// 32 GiB from a broken or hostile server) is a fatal out of memory.
	g := ipcguard.New(r.resp.Body, maxAnswerMetadata, r.maxBody, math.MaxInt64)
	refused := func(err error) error {
		if gerr := g.Err(); gerr != nil {
			return fmt.Errorf("client: the server's answer: %w", gerr)
		}
		return err
	}
	rd, err := ipc.NewReader(g, ipc.WithAllocator(memory.DefaultAllocator))
	if err != nil {
		yield(nil, refused(err))
		return
	}
	defer rd.Release()
	for rd.Next() {
		if !yield(rd.RecordBatch(), nil) {
			return
		}
	}
	if err := rd.Err(); err != nil {
		yield(nil, refused(err))
	}
}

// collect keeps every batch of a sequence; on an error it releases what it
// kept.
func collect(seq iter.Seq2[arrow.RecordBatch, error]) ([]arrow.RecordBatch, error) {
	var out []arrow.RecordBatch
	for rec, err := range seq {
		if err != nil {
			for _, r := range out {
				r.Release()
			}
			return nil, err
		}
		rec.Retain()
		out = append(out, rec)
	}
	return out, nil
}

// Take returns the rows whose column (default "id") holds one of keys.
func (c *Client) Take(ctx context.Context, name string, req api.TakeRequest) ([]arrow.RecordBatch, error) {
	body, err := jsonBody(req)
	if err != nil {
		return nil, err
	}
	return collect(c.call(ctx, http.MethodPost, c.url(name, "/take", nil), api.JSON, body, api.ArrowStream).stream)
}

// Delete deletes the rows matching filter (required) and says how many.
func (c *Client) Delete(ctx context.Context, name, filter string) (api.DeleteResult, error) {
	var out api.DeleteResult
	return out, c.call(ctx, http.MethodDelete, c.url(name, "/rows", url.Values{"filter": {filter}}), "", nil, "").json(&out)
}

// CreateIndex builds a key index of an integer, string or binary column of
// the table.
func (c *Client) CreateIndex(ctx context.Context, name, column string) (api.Index, error) {
	var out api.Index
	body, _ := jsonBody(api.IndexRequest{Column: column})
	return out, c.call(ctx, http.MethodPost, c.url(name, "/indexes", nil), api.JSON, body, "").json(&out)
}

// Indexes lists the table's key indexes.
func (c *Client) Indexes(ctx context.Context, name string) ([]api.Index, error) {
	var out api.IndexList
	err := c.call(ctx, http.MethodGet, c.url(name, "/indexes", nil), "", nil, "").json(&out)
	return out.Indexes, err
}

// Tables lists the server's tables with their newest versions.
func (c *Client) Tables(ctx context.Context) ([]api.ListedTable, error) {
	var out api.TableList
	err := c.call(ctx, http.MethodGet, c.base+"/api/v1/tables", "", nil, "").json(&out)
	return out.Tables, err
}

// Healthz reports whether the server answers.
func (c *Client) Healthz(ctx context.Context) error {
	return c.call(ctx, http.MethodGet, c.base+"/healthz", "", nil, "").none()
}
