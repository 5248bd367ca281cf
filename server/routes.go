package server

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"golang.org/x/sync/errgroup"

	"github.com/stratadb/strata/api"
	"github.com/stratadb/strata/commit"
	"github.com/stratadb/strata/compactor"
	"github.com/stratadb/strata/engine"
	"github.com/stratadb/strata/internal/ingest"
	"github.com/stratadb/strata/table"
	"github.com/stratadb/strata/walshard"
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
	const t = "/api/v1/tables/{name}"
	handle := func(pattern string, h func(w http.ResponseWriter, r *http.Request) error) {
		s.patterns = append(s.patterns, pattern)
		params := queries[pattern]
		s.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
			err := checkQuery(r, pattern, params)
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
	}
	// Routes on an existing table get it resolved first (404 if none).
	onTable := func(pattern string, h func(w http.ResponseWriter, r *http.Request, t *tableState) error) {
		handle(pattern, func(w http.ResponseWriter, r *http.Request) error {
			tb, err := s.table(r.Context(), r.PathValue("name"), false)
			if err != nil {
				return err
			}
			return h(w, r, tb)
		})
	}
	handle("GET /api/v1/tables", s.listTables)
	handle("PUT "+t, s.createTable)
	onTable("GET "+t, s.describeTable)
	onTable("DELETE "+t, s.dropTable)
	onTable("POST "+t+"/rows", s.appendRows)
	onTable("GET "+t+"/rows", s.scanRows)
	onTable("DELETE "+t+"/rows", s.deleteRows)
	onTable("POST "+t+"/take", s.takeRows)
	onTable("GET "+t+"/versions", s.versions)
	onTable("GET "+t+"/tags", s.tags)
	onTable("POST "+t+"/tags", s.createTag)
	onTable("DELETE "+t+"/tags/{tag}", s.deleteTag)
	onTable("GET "+t+"/indexes", s.indexes)
	onTable("POST "+t+"/indexes", s.createIndex)
	onTable("POST "+t+"/compact", s.compact)
	onTable("GET "+t+"/compact/stats", s.compactStats)
	onTable("POST "+t+"/lsm/flush", s.lsmFlush)
	onTable("POST "+t+"/lsm/compact", s.lsmMerge)
	onTable("GET "+t+"/lsm/stats", s.lsmStats)
	handle("GET /healthz", func(w http.ResponseWriter, r *http.Request) error { _, err := io.WriteString(w, "ok\n"); return err })
	handle("GET /metrics", func(w http.ResponseWriter, r *http.Request) error { s.serveMetrics(w, r); return nil })
	handle("GET /api/v1/openapi.json", func(w http.ResponseWriter, r *http.Request) error {
		w.Header().Set("Content-Type", api.JSON)
		_, err := w.Write(OpenAPI)
		return err
	})
	return nil
}

// deleteRows deletes the rows matching filter= (required). The server's
// own shard is flushed and merged first, so rows it acknowledged before
// are subject to the delete; rows of other writers not yet merged are not.
func (s *Server) deleteRows(w http.ResponseWriter, r *http.Request, t *tableState) error {
	f := r.URL.Query().Get("filter")
	if strings.TrimSpace(f) == "" {
		return badRequest("filter= is required (a filter that every row matches deletes every row)")
	}
	pred, err := table.ParseFilter(f)
	if err != nil {
		return err
	}
	sh, err := t.db.OwnShard(r.Context())
	if err != nil {
		return err
	}
	if sh != nil {
		if err := sh.Drain(r.Context()); err != nil {
			return err
		}
	}
	tb, err := commit.OpenTable(r.Context(), t.b, &commit.Options{Writer: "server:" + s.opts.Instance + " (delete)"})
	if err != nil {
		return err
	}
	res, n, err := tb.Delete(r.Context(), pred)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, api.DeleteResult{Deleted: n, Version: res.Version})
	return nil
}

func (s *Server) indexes(w http.ResponseWriter, r *http.Request, t *tableState) error {
	m, err := table.ReadLatest(r.Context(), t.b)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, api.IndexList{Indexes: apiIndexes(m.Indexes)})
	return nil
}

// createIndex builds a key index of an int64 column (take by key reads it
// after compactions without a scan) and answers 201 with it; building
// reads the column of every fragment.
func (s *Server) createIndex(w http.ResponseWriter, r *http.Request, t *tableState) error {
	if err := jsonBody(r); err != nil {
		return err
	}
	var req api.IndexRequest
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil || req.Column == "" {
		return badRequest("body must be {\"column\": NAME}")
	}
	tb, err := commit.OpenTable(r.Context(), t.b, &commit.Options{Writer: "server:" + s.opts.Instance + " (index)"})
	if err != nil {
		return err
	}
	sc := tb.Current().Manifest().Schema()
	idx := sc.FieldIndices(req.Column)
	if len(idx) != 1 {
		return badRequest("the table has no column %q", req.Column)
	}
	if table.KindOf(sc.Field(idx[0]).Type) != table.KindInt {
		return badRequest("a key index needs an integer column; %q is %s", req.Column, sc.Field(idx[0]).Type)
	}
	res, err := tb.CreateIndex(r.Context(), req.Column)
	if err != nil {
		return err
	}
	ix := res.Manifest.Transaction.Index
	if ix == nil {
		return fmt.Errorf("server: the index commit carries no index")
	}
	writeJSON(w, http.StatusCreated, apiIndex(*ix))
	return nil
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

// ingestOptions bounds the decoding of a request's rows by the body limit;
// ignore_unknown=true drops columns the table does not have.
func (s *Server) ingestOptions(r *http.Request) ingest.Options {
	return ingest.Options{Limit: s.opts.MaxBodyBytes, IgnoreUnknown: r.URL.Query().Get("ignore_unknown") == "true"}
}

func badRequestOrLimit(err error, what string) error {
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return err
	}
	return badRequest("%s: %v", what, err)
}

// scanOptions reads columns= and filter=.
func scanOptions(r *http.Request) (table.ScanOptions, error) {
	var o table.ScanOptions
	q := r.URL.Query()
	if c := q.Get("columns"); c != "" {
		cols, err := table.ParseColumns(c)
		if err != nil {
			return o, err
		}
		o.Columns = cols
	}
	if f := q.Get("filter"); f != "" {
		p, err := table.ParseFilter(f)
		if err != nil {
			return o, err
		}
		o.Filter = p
	}
	return o, nil
}

// wantsJSONLines tells the answer's format: format=jsonl or format=arrow,
// or without format= JSON lines when Accept asks for them and Arrow IPC
// otherwise.
func wantsJSONLines(r *http.Request) bool {
	switch r.URL.Query().Get("format") {
	case "jsonl":
		return true
	case "arrow":
		return false
	}
	return strings.Contains(r.Header.Get("Accept"), NDJSON)
}

// writeRows streams batches as Arrow IPC or JSON lines, at most limit
// rows (< 0: all; 0: none, the schema alone in Arrow IPC).
func (s *Server) writeRows(w http.ResponseWriter, r *http.Request, schema *arrow.Schema, limit int64, batches func(yield func(arrow.RecordBatch, error) bool)) error {
	if limit == 0 {
		batches = func(func(arrow.RecordBatch, error) bool) {}
	}
	jsonl := wantsJSONLines(r)
	jl := &jsonLines{w: w}
	var iw *ipc.Writer
	started := false
	start := func() {
		started = true
		if jsonl {
			w.Header().Set("Content-Type", NDJSON)
		} else {
			w.Header().Set("Content-Type", ArrowStream)
			iw = ipc.NewWriter(w, ipc.WithSchema(schema))
		}
		w.WriteHeader(http.StatusOK)
	}
	var n int64
	// Mid-stream, the status is sent: a failure cuts the connection
	// without ending the body, so that the client's read fails instead of
	// taking a short answer for a whole one. A client that went away is
	// no failure.
	cut := func(err error) {
		if r.Context().Err() != nil {
			return
		}
		s.opts.Log.Error("scan failed after the answer began; cutting the connection", "error", err.Error())
		panic(http.ErrAbortHandler)
	}
	for rec, err := range batches {
		if err != nil {
			if !started {
				return err
			}
			cut(err)
			return nil
		}
		if !started {
			start()
		}
		if limit > 0 && n+rec.NumRows() > limit {
			rec = rec.NewSlice(0, limit-n)
			defer rec.Release()
		}
		n += rec.NumRows()
		if jsonl {
			if err := jl.write(rec); err != nil {
				cut(err)
				return nil
			}
		} else {
			// The batch in the writer's very types (see table.TypesEqual).
			out := table.WithTypesOf(schema, rec)
			err := iw.Write(out)
			out.Release()
			if err != nil {
				cut(err)
				return nil
			}
		}
		if limit > 0 && n >= limit {
			break
		}
	}
	if !started {
		start()
	}
	if iw != nil {
		return iw.Close()
	}
	return nil
}

func (s *Server) scanRows(w http.ResponseWriter, r *http.Request, t *tableState) error {
	opts, err := scanOptions(r)
	if err != nil {
		return err
	}
	q := r.URL.Query()
	var oo table.OpenOptions
	if v, ok := intQuery(r, "version"); ok {
		oo.Version = uint64(v)
	}
	oo.Tag = q.Get("tag")
	fresh := q.Get("fresh") == "true"
	if (oo.Version != 0) && oo.Tag != "" || fresh && (oo.Version != 0 || oo.Tag != "") {
		return badRequest("give at most one of version=, tag= and fresh=true")
	}
	limit := int64(-1) // all
	if l, ok := intQuery(r, "limit"); ok {
		limit = l
	}
	// Bounded buffering: a few fragments and batches in flight, each
	// fragment's weight reserved before it is read, and no more read
	// ahead than the client takes (writes block on a slow one).
	opts.Parallelism, opts.BatchSize, opts.ReadAheadBytes = scanParallelism, scanBatchRows, scanReadAhead
	holds := s.budget.newHolds()
	opts.Memory, opts.Hold = &scanMemory{b: s.budget}, holds
	release, err := holds.hold(r.Context(), scanHold)
	if err != nil {
		return err
	}
	defer release()
	if fresh {
		return s.scanFresh(w, r, t, opts, limit)
	}
	snap, err := table.Open(r.Context(), t.b, &oo)
	if err != nil {
		return err
	}
	schema, err := snap.ScanSchema(opts)
	if err != nil {
		return badRequest("%v", err)
	}
	return s.writeRows(w, r, schema, limit, snap.Scan(r.Context(), opts))
}

// scanFresh answers GET …/rows?fresh=true: the latest version and every
// row acknowledged but not yet merged, through any shard of the fleet,
// each once (walshard.ScanFleet).
func (s *Server) scanFresh(w http.ResponseWriter, r *http.Request, t *tableState, opts table.ScanOptions, limit int64) error {
	snap, err := table.Open(r.Context(), t.b, nil)
	if err != nil {
		return err
	}
	schema, err := snap.ScanSchema(opts)
	if err != nil {
		return badRequest("%v", err)
	}
	return s.writeRows(w, r, schema, limit, walshard.ScanFleet(r.Context(), t.b, opts))
}

func (s *Server) takeRows(w http.ResponseWriter, r *http.Request, t *tableState) error {
	var req api.TakeRequest
	holds := s.budget.newHolds()
	decoding, err := holds.hold(r.Context(), s.bodyReserve(r))
	if err != nil {
		return err
	}
	defer decoding()
	if err := jsonBody(r); err != nil {
		return err
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		return badRequestOrLimit(err, "body is not a take request")
	}
	if req.Column == "" {
		req.Column = "id"
	}
	if len(req.Keys) > s.opts.MaxTakeKeys {
		return &apiError{http.StatusRequestEntityTooLarge, api.CodeTooManyKeys,
			fmt.Sprintf("%d keys; a take asks for at most %d (split the request)", len(req.Keys), s.opts.MaxTakeKeys)}
	}
	release, err := holds.hold(r.Context(), int64(len(req.Keys))*takeRowReserve+scanHold)
	if err != nil {
		return err
	}
	defer release()
	snap, err := table.Open(r.Context(), t.b, nil)
	if err != nil {
		return err
	}
	schema, err := snap.ScanSchema(table.ScanOptions{Columns: req.Columns})
	if err != nil {
		return badRequest("%v", err)
	}
	// Its scans read as a scan's do, within the budget.
	recs, _, err := snap.TakeWith(r.Context(), req.Column, req.Keys, table.ScanOptions{Columns: req.Columns,
		Parallelism: scanParallelism, BatchSize: scanBatchRows, ReadAheadBytes: scanReadAhead, Memory: &scanMemory{b: s.budget}})
	if err != nil {
		return err
	}
	defer func() {
		for _, rec := range recs {
			rec.Release()
		}
	}()
	return s.writeRows(w, r, schema, -1, func(yield func(arrow.RecordBatch, error) bool) {
		for _, rec := range recs {
			if !yield(rec, nil) {
				return
			}
		}
	})
}

func (s *Server) versions(w http.ResponseWriter, r *http.Request, t *tableState) error {
	limit, _ := intQuery(r, "limit")
	detail := r.URL.Query().Get("detail") == "true"
	vs, err := table.Versions(r.Context(), t.b, int(limit), detail)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, apiVersions(vs))
	return nil
}

func (s *Server) tags(w http.ResponseWriter, r *http.Request, t *tableState) error {
	if _, err := table.LatestVersion(r.Context(), t.b); err != nil {
		return err
	}
	tags, err := table.Tags(r.Context(), t.b)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, apiTags(tags))
	return nil
}

func (s *Server) createTag(w http.ResponseWriter, r *http.Request, t *tableState) error {
	var req api.TagRequest
	if err := jsonBody(r); err != nil {
		return err
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		return badRequestOrLimit(err, "body is not a tag")
	}
	if req.Version == 0 {
		var err error
		if req.Version, err = table.LatestVersion(r.Context(), t.b); err != nil {
			return err
		}
	}
	if err := table.CreateTag(r.Context(), t.b, req.Name, req.Version); err != nil {
		if errors.Is(err, table.ErrTagExists) || errors.Is(err, table.ErrVersionNotFound) {
			return err
		}
		return badRequest("%v", err)
	}
	tag, err := table.ReadTag(r.Context(), t.b, req.Name)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, apiTag(tag))
	return nil
}

// deleteTag removes a tag: 204, or 404 when there is none.
func (s *Server) deleteTag(w http.ResponseWriter, r *http.Request, t *tableState) error {
	if err := table.DeleteTag(r.Context(), t.b, r.PathValue("tag")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// compact starts a compaction of the base table under the table's lease and
// answers 202 with a Location to the stats; 409 when another compactor
// holds the lease (naming it) or the policy says not now.
func (s *Server) compact(w http.ResponseWriter, r *http.Request, t *tableState) error {
	var req api.CompactRequest
	if r.ContentLength != 0 {
		if err := jsonBody(r); err != nil {
			return err
		}
		dec := json.NewDecoder(r.Body)
		dec.DisallowUnknownFields()
		if err := dec.Decode(&req); err != nil && !errors.Is(err, io.EOF) {
			return badRequestOrLimit(err, "body is not a compaction request")
		}
		if dec.More() {
			return badRequest("body is not a compaction request: more than one JSON value")
		}
		if req.MinFragments < 0 || req.TargetRows < 0 || req.TargetBytes < 0 {
			return badRequest("min_fragments, target_rows and target_bytes must not be negative")
		}
	}
	p := s.opts.Compaction
	if req.TargetRows > 0 {
		p.TargetRows = req.TargetRows
	}
	if req.TargetBytes > 0 {
		p.TargetBytes = req.TargetBytes
	}
	minGiven := req.MinFragments > 0
	if minGiven {
		p.MinFragments = req.MinFragments
	} else {
		p.MinFragments = 1 // an operator asked
	}
	m, err := table.ReadLatest(r.Context(), t.b)
	if err != nil {
		return err
	}
	if req.Force {
		p.QuietWindows = nil
	}
	if due, why := compactor.ShouldCompact(m, p, time.Now()); !due && (minGiven || len(p.QuietWindows) > 0) {
		return &apiError{http.StatusConflict, api.CodeNotDue, "compaction not due: " + why}
	}
	if req.DryRun {
		plan := compactor.PlanCompaction(m, *p.EnsureDefaults())
		after := len(m.Fragments) - plan.Sources() + len(plan.Bins)
		writeJSON(w, http.StatusOK, api.CompactPlan{Version: m.Version, Bins: len(plan.Bins), FragmentsBefore: len(m.Fragments),
			FragmentsAfter: after, Plan: strings.TrimSpace(plan.String())})
		return nil
	}
	err = t.db.CompactInBackground(r.Context(), engine.CompactOptions{Policy: &p})
	var held *compactor.LeaseHeldError
	switch {
	case errors.Is(err, engine.ErrCompactionRunning):
		return &apiError{http.StatusConflict, api.CodeCompactionRunning, "a compaction of this table by this server is already running"}
	case errors.As(err, &held):
		return &apiError{http.StatusConflict, api.CodeLeaseHeld, fmt.Sprintf("another compactor holds the table's lease: %s, until %s",
			held.Holder, held.Expires.UTC().Format(time.RFC3339))}
	case err != nil:
		return err
	}
	w.Header().Set("Location", "/api/v1/tables/"+t.name+"/compact/stats")
	w.WriteHeader(http.StatusAccepted)
	return nil
}

func (s *Server) compactStats(w http.ResponseWriter, r *http.Request, t *tableState) error {
	// The history first, then the table: a run is recorded after its
	// commit, so the fragment count is never older than the history.
	st, err := compactor.ReadStatus(r.Context(), t.b, 20)
	if err != nil {
		return err
	}
	m, err := table.ReadLatest(r.Context(), t.b)
	if err != nil {
		return err
	}
	now := time.Now()
	out := api.CompactStats{Fragments: len(m.Fragments), Running: t.db.Compacting(), TotalCompactions: st.TotalCompactions,
		TotalAdopted: st.TotalAdopted, History: apiRuns(st.History), SkippedRecords: st.Skipped}
	lease, held, err := compactor.CurrentLease(r.Context(), t.b, now)
	if err != nil {
		return err
	}
	if held {
		out.Running, out.Holder, out.LeaseExpires = true, &lease.Holder, &lease.Expires
	}
	out.Due, out.DueReason = compactor.ShouldCompact(m, s.opts.Compaction, now)
	if !st.LastCompaction.IsZero() {
		out.LastCompaction = &st.LastCompaction
	}
	if st.LastError != "" {
		out.LastError, out.LastErrorAt = &st.LastError, &st.LastErrorAt
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// lsmFlush seals the server's memtable of the table into a generation in
// the background and answers 202 with no body.
func (s *Server) lsmFlush(w http.ResponseWriter, r *http.Request, t *tableState) error {
	sh, err := t.db.Shard(r.Context())
	if err != nil {
		return err
	}
	t.db.Go("flush", func(ctx context.Context) error {
		_, err := sh.Flush(ctx)
		return err
	})
	w.WriteHeader(http.StatusAccepted)
	return nil
}

// lsmMerge starts a merge of the table — every shard's flushed
// generations in one commit, whoever wrote them — in the background;
// 429 while one of this server runs.
func (s *Server) lsmMerge(w http.ResponseWriter, r *http.Request, t *tableState) error {
	if t.db.Merging() {
		return &apiError{http.StatusTooManyRequests, api.CodeMergeRunning, "a merge of this table is running"}
	}
	t.db.Go("merge", func(ctx context.Context) error {
		_, err := t.db.Merge(ctx)
		if errors.Is(err, engine.ErrMergeRunning) {
			return nil
		}
		return err
	})
	w.WriteHeader(http.StatusAccepted)
	return nil
}

func shardStats(st walshard.Stats, withRows bool) api.ShardStats {
	out := api.ShardStats{Shard: st.Shard, Own: st.Local, Epoch: st.Epoch, WALLastWritten: st.WALLastWritten, WALFlushed: st.WALFlushed,
		WALLag: st.WALLag, Watermark: st.Watermark, PendingGenerations: st.PendingGenerations, PendingBytes: st.PendingBytes,
		NewestGeneration: st.NewestGeneration, Quarantined: apiQuarantined(st.Quarantined)}
	if st.Local {
		out.MemtableRows, out.MemtableBytes, out.MemtableFrom, out.Merging = &st.MemtableRows, &st.MemtableBytes, &st.MemtableFrom, &st.Merging
	} else if !st.LastWrite.IsZero() {
		out.LastWrite = &st.LastWrite
	}
	if withRows {
		out.PendingRows = &st.PendingRows
	}
	return out
}

func (s *Server) lsmStats(w http.ResponseWriter, r *http.Request, t *tableState) error {
	m, err := table.ReadLatest(r.Context(), t.b)
	if err != nil {
		return err
	}
	withRows := r.URL.Query().Get("include_generation_rows") == "true"
	ids, err := walshard.Shards(r.Context(), t.b, m)
	if err != nil {
		return err
	}
	// This server's shard from before a restart is opened, so the rows its
	// WAL acknowledged show in its memtable (a checkpoint waits for them).
	own, err := t.db.OwnShard(r.Context())
	if err != nil {
		return err
	}
	if own != nil && !slices.Contains(ids, own.ID()) {
		ids = append(ids, own.ID())
	}
	stats := make([]*api.ShardStats, len(ids))
	g, gctx := errgroup.WithContext(r.Context())
	g.SetLimit(32)
	for i, id := range ids {
		g.Go(func() error {
			var st walshard.Stats
			if own != nil && id == own.ID() {
				st = own.StatsAt(m)
			} else if st, err = walshard.InspectAt(gctx, t.b, id, m); errors.Is(err, walshard.ErrUnknownShard) {
				return nil
			} else if err != nil {
				return err
			}
			ss := shardStats(st, withRows)
			stats[i] = &ss
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	out := api.LSMStats{Version: m.Version, Merging: t.db.Merging(), Shards: []api.ShardStats{}}
	for _, st := range stats {
		if st != nil {
			out.Shards = append(out.Shards, *st)
		}
	}
	slices.SortFunc(out.Shards, func(a, b api.ShardStats) int { return strings.Compare(a.Shard, b.Shard) })
	writeJSON(w, http.StatusOK, out)
	return nil
}
