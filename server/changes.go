package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/stratadb/strata/api"
	"github.com/stratadb/strata/table"
	"github.com/stratadb/strata/table/changes"
	"github.com/stratadb/strata/table/evolve"
	"github.com/stratadb/strata/table/expr"
)

// changes answers GET …/changes?from=A[&to=B][&wait=D]: the rows versions A+1
// through B (the latest by default) inserted and deleted
// (changes.Changes), those filter= matches if it is given, each with its
// _change and _version columns, as Arrow
// or JSON lines, under the memory budget as a scan is. The Strata-Version
// header names the version read through: a consumer that stores it asks
// from there next time, and so reads every row once. A range whose first
// version garbage collection removed is 410 version_collected, naming the
// oldest version left. An Arrow answer carries the schema of version B
// (with the two columns); a range across an overwrite that changed the
// schema is read as JSON lines. consumer=NAME stands for from= the named
// consumer's position; from_as_of= and to_as_of= name the bounds by time
// (the versions as of those times). With wait=, when no version is past from, it waits
// up to that long (at most a minute) for one, looking every 100ms, and
// answers no rows, naming from, if none lands: a long poll. group= reads
// a consumer group's member's share instead (groupChanges).
func (s *Server) changes(w http.ResponseWriter, r *http.Request, t *tableState) error {
	q := r.URL.Query()
	if q.Has("group") {
		return s.groupChanges(w, r, t)
	}
	from, err := s.changesFrom(r, t)
	if err != nil {
		return err
	}
	var wait time.Duration
	if v := q.Get("wait"); v != "" {
		if wait, err = time.ParseDuration(v); err != nil || wait < 0 {
			return badRequest("wait=%q: want a duration such as 30s", v)
		}
		wait = min(wait, maxChangesWait)
	}
	latest, err := waitForVersion(r.Context(), t, from, wait)
	if err != nil {
		return err
	}
	to := latest
	if q.Has("to_as_of") {
		if q.Has("to") {
			return badRequest("give one of to= and to_as_of=")
		}
		at, err := table.ParseAsOf(q.Get("to_as_of"), time.Now())
		if err != nil {
			return badRequest("to_as_of=: %v", err)
		}
		m, err := table.VersionAsOf(r.Context(), t.b, at)
		if err != nil {
			return err
		}
		to = m.Version
	}
	if v := q.Get("to"); v != "" {
		if to, err = strconv.ParseUint(v, 10, 64); err != nil || to == 0 {
			return badRequest("to=%q: want a version", v)
		}
		if to > latest {
			return &apiError{http.StatusNotFound, api.CodeNotFound, fmt.Sprintf("version %d: the latest is %d", to, latest)}
		}
	}
	if from > to {
		return badRequest("from=%d is after to=%d", from, to)
	}
	opts, err := changesOptions(r)
	if err != nil {
		return err
	}
	limit := int64(-1)
	if l, ok := intQuery(r, "limit"); ok {
		limit = l
	}
	schema, release, err := s.changesAnswer(r, t, to, &opts, false)
	if err != nil {
		return err
	}
	defer release()
	w.Header().Set("Strata-Version", strconv.FormatUint(to, 10))
	return s.writeRows(w, r, schema, limit, changes.ChangeRows(changes.Changes(r.Context(), t.b, from, to, opts), nil))
}

// changesOptions reads a changes request's columns= and filter=.
func changesOptions(r *http.Request) (changes.ChangesOptions, error) {
	q := r.URL.Query()
	opts := changes.ChangesOptions{BatchSize: scanBatchRows, Parallelism: scanParallelism, ReadAheadBytes: scanReadAhead}
	var err error
	if c := q.Get("columns"); c != "" {
		if opts.Columns, err = expr.ParseColumns(c); err != nil {
			return opts, badRequest("%v", err)
		}
	}
	if f := q.Get("filter"); f != "" {
		if opts.Filter, err = expr.ParseFilter(f); err != nil {
			return opts, badRequest("%v", err)
		}
	}
	return opts, nil
}

// changesAnswer readies the reads of changes through version to: every
// version's rows in to's schema (opts.As), under the memory budget as a
// scan is; it returns the answer's schema — the columns asked for, then
// _change and _version (and _unit, for a group's member) — and the
// release of the budget's share.
func (s *Server) changesAnswer(r *http.Request, t *tableState, to uint64, opts *changes.ChangesOptions, unit bool) (*arrow.Schema, func(), error) {
	m, err := table.ReadManifest(r.Context(), t.b, to)
	if err != nil {
		return nil, nil, err
	}
	schema, err := table.NewSnapshot(t.b, m).ScanSchema(table.ScanOptions{Columns: opts.Columns})
	if err != nil {
		return nil, nil, badRequest("%v", err)
	}
	opts.As = m.Schema()
	fields := append(schema.Fields(),
		arrow.Field{Name: evolve.ChangeColumn, Type: arrow.BinaryTypes.String},
		arrow.Field{Name: evolve.VersionColumn, Type: arrow.PrimitiveTypes.Uint64})
	if unit {
		fields = append(fields, arrow.Field{Name: evolve.UnitColumn, Type: arrow.PrimitiveTypes.Uint64})
	}
	holds := s.budget.newHolds()
	opts.Memory = &scanMemory{b: s.budget}
	release, err := holds.hold(r.Context(), scanHold)
	if err != nil {
		return nil, nil, err
	}
	return arrow.NewSchema(fields, nil), release, nil
}

// maxChangesWait bounds a long poll (wait=); changesPoll is how often it
// looks for a new version (one LIST each).
const (
	maxChangesWait = time.Minute
	changesPoll    = 100 * time.Millisecond
)

// changesFrom is the version a request's changes come after: from=, or
// the position of the consumer named by consumer=.
func (s *Server) changesFrom(r *http.Request, t *tableState) (uint64, error) {
	q := r.URL.Query()
	if q.Has("from_as_of") {
		if q.Has("from") || q.Has("consumer") {
			return 0, badRequest("give one of from=, from_as_of= and consumer=")
		}
		at, err := table.ParseAsOf(q.Get("from_as_of"), time.Now())
		if err != nil {
			return 0, badRequest("from_as_of=: %v", err)
		}
		return table.FromAsOf(r.Context(), t.b, at)
	}
	if v := q.Get("from"); v != "" {
		from, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return 0, badRequest("from=%q: want a version (0: the table's creation)", v)
		}
		return from, nil
	}
	name := q.Get("consumer")
	if name == "" {
		return 0, badRequest("changes need from=VERSION, the version they come after (0: the table's creation), or consumer=NAME")
	}
	c, err := table.ReadConsumer(r.Context(), t.b, name)
	return c.Version, err
}

// waitForVersion returns the latest version once it is past from, or
// when wait has passed (then it may be from itself).
func waitForVersion(ctx context.Context, t *tableState, from uint64, wait time.Duration) (uint64, error) {
	deadline := time.Now().Add(wait)
	for {
		latest, err := table.LatestVersion(ctx, t.b)
		if err != nil || latest != from || !time.Now().Before(deadline) {
			return latest, err // a start past the latest is refused at once
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(min(changesPoll, time.Until(deadline))):
		}
	}
}

// consumers answers GET …/consumers: every named consumer's position and
// lag behind the latest version.
func (s *Server) consumers(w http.ResponseWriter, r *http.Request, t *tableState) error {
	latest, err := table.LatestVersion(r.Context(), t.b)
	if err != nil {
		return err
	}
	cs, err := table.Consumers(r.Context(), t.b)
	if err != nil {
		return err
	}
	out := []api.Consumer{}
	for _, c := range cs {
		out = append(out, api.Consumer{Name: c.Name, Version: c.Version, Updated: c.Updated, Lag: latest - min(c.Version, latest)})
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// setConsumer answers PUT …/consumers/{consumer} {"version": V}: the
// consumer has read every change through V. A body without a version is
// 400 (it would rewind the consumer to the table's creation); 410 when V
// is at or below the garbage collector's boundary, and nothing is stored.
func (s *Server) setConsumer(w http.ResponseWriter, r *http.Request, t *tableState) error {
	var req struct {
		Version *uint64 `json:"version"`
	}
	if err := jsonBody(r); err != nil {
		return err
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		return badRequestOrLimit(err, `body is not a consumer position: want {"version": V}`)
	}
	if req.Version == nil {
		return badRequest(`body names no version: want {"version": V}, the version the consumer has read through (0: none yet)`)
	}
	name := r.PathValue("consumer")
	if err := table.SetConsumer(r.Context(), t.b, name, *req.Version); err != nil {
		return err
	}
	c, err := table.ReadConsumer(r.Context(), t.b, name)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, api.Consumer{Name: c.Name, Version: c.Version, Updated: c.Updated})
	return nil
}

// deleteConsumer answers DELETE …/consumers/{consumer}: 204, or 404.
func (s *Server) deleteConsumer(w http.ResponseWriter, r *http.Request, t *tableState) error {
	if err := table.DeleteConsumer(r.Context(), t.b, r.PathValue("consumer")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
