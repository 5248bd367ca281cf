package server

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"net/http"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/stratadb/strata/api"
	"github.com/stratadb/strata/table"
	"github.com/stratadb/strata/table/expr"
	"github.com/stratadb/strata/table/value"
)

// deleteRows deletes the rows matching filter= (required). The server's
// own shard is flushed and merged first, so rows it acknowledged before
// are subject to the delete; rows of other writers not yet merged are not.
func (s *Server) deleteRows(w http.ResponseWriter, r *http.Request, t *tableState) error {
	pred, err := requiredFilter(r, "deletes")
	if err != nil {
		return err
	}
	res, n, err := t.db.Delete(r.Context(), pred)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, api.DeleteResult{Deleted: n, Version: res.Version})
	return nil
}

// updateRows answers PATCH …/rows?filter=EXPR {"set": {"col": value},
// "set_sql": "col = expression, ..."}: the matching rows get the values,
// in one commit (engine.DB.Update).
// A float column takes NaN, Infinity and -Infinity bare (as Python's json
// writes them) or as strings.
// The server's own shard is flushed and merged first, as for a delete.
func (s *Server) updateRows(w http.ResponseWriter, r *http.Request, t *tableState) error {
	pred, err := requiredFilter(r, "updates")
	if err != nil {
		return err
	}
	if err := jsonBody(r); err != nil {
		return err
	}
	var req api.UpdateRequest
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 1<<20))
	if err != nil {
		return badRequestOrLimit(err, "reading the body")
	}
	nb := readNonFinite(body)
	dec := json.NewDecoder(bytes.NewReader(nb.data))
	dec.UseNumber()
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return badRequestOrLimit(err, "body is not an update: want {\"set\": {\"column\": value}} or {\"set_sql\": \"column = expression\"}")
	}
	if dec.More() {
		return badRequest("body is not an update: more than one JSON value")
	}
	var set []expr.Assignment
	if strings.TrimSpace(req.SetSQL) != "" {
		as, err := expr.ParseAssignments(req.SetSQL)
		if err != nil {
			return err
		}
		set = as
	}
	for col, v := range req.Set {
		val, err := jsonValue(v, nb)
		if err != nil {
			return badRequest("set.%s: %v", col, err)
		}
		set = append(set, expr.Assignment{Column: col, Value: val})
	}
	res, err := t.db.Update(r.Context(), pred, set)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, api.UpdateResult{Updated: res.Updated, Version: res.Version})
	return nil
}

// jsonValue is a JSON scalar (decoded with UseNumber) as a table value;
// null is the zero Value, and a bare NaN or infinity of nb its float.
func jsonValue(v any, nb nonFiniteBody) (value.Value, error) {
	switch x := v.(type) {
	case nil:
		return value.Value{}, nil
	case bool:
		return value.Bool(x), nil
	case string:
		return value.String(x), nil
	case json.Number:
		if i, err := x.Int64(); err == nil {
			return value.Int(i), nil
		}
		f, err := x.Float64()
		if err != nil {
			return value.Value{}, fmt.Errorf("%s is not a number", x)
		}
		return value.Float(f), nil
	case map[string]any:
		if f, ok := nb.float(x); ok {
			return value.Float(f), nil
		}
	}
	return value.Value{}, fmt.Errorf("want a number (NaN, Infinity and -Infinity too), a string, true, false or null")
}

// requiredFilter reads filter=, which a verb that changes rows requires
// (what a filter every row matches does: "deletes", "updates").
func requiredFilter(r *http.Request, does string) (expr.Predicate, error) {
	f := r.URL.Query().Get("filter")
	if strings.TrimSpace(f) == "" {
		return nil, badRequest("filter= is required (a filter that every row matches %s every row)", does)
	}
	return expr.ParseFilter(f)
}

// scanOptions reads columns=, filter= and a slice (sliceQuery).
func scanOptions(r *http.Request) (o table.ScanOptions, err error) {
	q := r.URL.Query()
	if c := q.Get("columns"); c != "" {
		cols, err := expr.ParseColumns(c)
		if err != nil {
			return o, err
		}
		o.Columns = cols
	}
	if f := q.Get("filter"); f != "" {
		p, err := expr.ParseFilter(f)
		if err != nil {
			return o, err
		}
		o.Filter = p
	}
	o.Slice, err = sliceQuery(r)
	return o, err
}

// writeRows streams batches as Arrow IPC, JSON lines or CSV (see
// answerFormat), at most limit rows (< 0: all; 0: none, the schema alone
// in Arrow IPC, the header in CSV).
func (s *Server) writeRows(w http.ResponseWriter, r *http.Request, schema *arrow.Schema, limit int64, batches func(yield func(arrow.RecordBatch, error) bool)) error {
	if limit == 0 {
		batches = func(func(arrow.RecordBatch, error) bool) {}
	}
	format, err := answerFormat(r)
	if err != nil {
		return err
	}
	var enc rowEncoder
	start := func() error {
		enc, err = newEncoder(w, format, schema)
		return err
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
			if enc == nil {
				return err
			}
			cut(err)
			return nil
		}
		if enc == nil {
			if err := start(); err != nil {
				return err
			}
		}
		if limit > 0 && n+rec.NumRows() > limit {
			rec = rec.NewSlice(0, limit-n)
			defer rec.Release()
		}
		n += rec.NumRows()
		if err := enc.write(rec); err != nil {
			cut(err)
			return nil
		}
		if limit > 0 && n >= limit {
			break
		}
	}
	if enc == nil {
		if err := start(); err != nil {
			return err
		}
	}
	return enc.close()
}

// readPoint reads what a read asks to see: a version (version=, tag=,
// as_of= for the newest committed at or before a time, or the latest), every acknowledged row (fresh=true), or the latest with
// the client's own writes (written=, see ownWrites).
func readPoint(r *http.Request) (oo table.OpenOptions, fresh bool, written map[string]uint64, err error) {
	q := r.URL.Query()
	if v, ok := intQuery(r, "version"); ok {
		oo.Version = uint64(v)
	}
	oo.Tag = q.Get("tag")
	if q.Has("as_of") {
		if oo.AsOf, err = table.ParseAsOf(q.Get("as_of"), time.Now()); err != nil {
			return oo, false, nil, badRequest("as_of=: %v", err)
		}
	}
	fresh = q.Get("fresh") == "true"
	given := 0
	for _, g := range []bool{oo.Version != 0, oo.Tag != "", !oo.AsOf.IsZero(), fresh} {
		if g {
			given++
		}
	}
	if given > 1 {
		return oo, false, nil, badRequest("give at most one of version=, tag=, as_of= and fresh=true")
	}
	if written, err = writtenQuery(r); err != nil {
		return oo, false, nil, err
	}
	if written != nil && given > 0 && !fresh {
		return oo, false, nil, badRequest("written= reads the latest version: not with version=, tag= or as_of=")
	}
	return oo, fresh, written, nil
}

// openRead holds the scan's share of the memory budget (opts reads under
// it) and opens the version oo names; release gives the share back.
func (s *Server) openRead(r *http.Request, t *tableState, oo table.OpenOptions, opts *table.ScanOptions) (*table.Snapshot, func(), error) {
	holds := s.budget.newHolds()
	opts.Memory, opts.Hold = &scanMemory{b: s.budget}, holds
	release, err := holds.hold(r.Context(), scanHold)
	if err != nil {
		return nil, nil, err
	}
	snap, err := table.Open(r.Context(), t.b, &oo)
	if err != nil {
		release()
		return nil, nil, err
	}
	return snap, release, nil
}

// rowsIn counts the rows of a sequence of batches.
func rowsIn(rows iter.Seq2[arrow.RecordBatch, error]) (int64, error) {
	var n int64
	for rec, err := range rows {
		if err != nil {
			return n, err
		}
		n += rec.NumRows()
	}
	return n, nil
}

func (s *Server) scanRows(w http.ResponseWriter, r *http.Request, t *tableState) error {
	opts, err := scanOptions(r)
	if err != nil {
		return err
	}
	oo, fresh, written, err := readPoint(r)
	if err != nil {
		return err
	}
	limit := int64(-1) // all
	if l, ok := intQuery(r, "limit"); ok {
		limit = l
	}
	// Bounded buffering: a few fragments and batches in flight, each
	// fragment's weight reserved before it is read, and no more read
	// ahead than the client takes (writes block on a slow one).
	opts.Parallelism, opts.BatchSize, opts.ReadAheadBytes = scanParallelism, scanBatchRows, scanReadAhead
	snap, release, err := s.openRead(r, t, oo, &opts)
	if err != nil {
		return err
	}
	defer release()
	schema, err := snap.ScanSchema(opts)
	if err != nil {
		return badRequest("%v", err)
	}
	// fresh=true: the latest version and every row acknowledged but not
	// yet merged, through any shard of the fleet, each once; written=:
	// what the client's own writes need (see ownWrites).
	rows := snap.Scan(r.Context(), opts)
	if fresh {
		rows = t.db.ScanFresh(r.Context(), opts)
	} else if written != nil {
		if own := s.ownWrites(r.Context(), t, snap, written, opts); own != nil {
			rows = own
		}
	}
	return s.writeRows(w, r, schema, limit, rows)
}

func (s *Server) takeRows(w http.ResponseWriter, r *http.Request, t *tableState) error {
	var req takeRequest
	holds := s.budget.newHolds()
	decoding, err := holds.hold(r.Context(), s.bodyReserve(r))
	if err != nil {
		return err
	}
	defer decoding()
	if err := jsonBody(r); err != nil {
		return err
	}
	req, err = decodeTake(r.Body, s.opts.MaxTakeKeys)
	var ae *apiError
	if errors.As(err, &ae) {
		return err
	}
	if err != nil {
		return badRequestOrLimit(err, "body is not a take request")
	}
	if req.Column == "" {
		req.Column = "id"
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
	keys, err := binaryKeys(snap.Manifest().Schema(), req.Column, req.Keys)
	if err != nil {
		return err
	}
	// Its scans read as a scan's do, within the budget; the rows it
	// keeps for the answer are held of the request's share.
	kept := &takeHold{h: holds, limit: s.budget.holds.size}
	recs, res, err := snap.TakeWith(r.Context(), req.Column, keys, table.ScanOptions{Columns: req.Columns,
		Parallelism: scanParallelism, BatchSize: scanBatchRows, ReadAheadBytes: scanReadAhead, Memory: &scanMemory{b: s.budget}, Hold: kept})
	if err != nil {
		return err
	}
	defer kept.Release(res.Held)
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

// takeHold is a take's ScanOptions.Hold: the rows it keeps for its answer
// (a key may match many), reserved of the request's holds. Past the holds
// part, all that one request could ever be granted, the take is refused.
type takeHold struct {
	h     *holds
	limit int64
	used  int64 // Reserve and Release come from the take's one goroutine
}

func (t *takeHold) Reserve(ctx context.Context, n int64) error {
	if t.used+n > t.limit {
		return &apiError{http.StatusRequestEntityTooLarge, api.CodeTooLarge, fmt.Sprintf(
			"the rows these keys match pass %d bytes, what a read may hold of the server's memory budget; take fewer keys, or scan with a filter (GET /rows streams)", t.limit)}
	}
	if err := t.h.Reserve(ctx, n); err != nil {
		return err
	}
	t.used += n
	return nil
}

func (t *takeHold) Release(n int64) {
	if n > 0 {
		t.h.Release(n)
		t.used -= n
	}
}

// binaryKeys are keys with those of a binary column decoded from base64,
// as JSON rows carry binaries: a key that is not base64 is a 400.
func binaryKeys(schema *arrow.Schema, col string, keys []value.Value) ([]value.Value, error) {
	fi := schema.FieldIndices(col)
	if len(fi) != 1 || value.KindOf(schema.Field(fi[0]).Type) != value.KindBytes {
		return keys, nil
	}
	out := make([]value.Value, len(keys))
	for i, k := range keys {
		if k.Kind != value.KindString {
			return nil, badRequest("key %d: column %q is binary: its keys are base64 strings", i, col)
		}
		b, err := base64.StdEncoding.DecodeString(k.S)
		if err != nil {
			return nil, badRequest("key %d: column %q is binary: its keys are base64 strings (%v)", i, col, err)
		}
		out[i] = value.Bytes(b)
	}
	return out, nil
}
