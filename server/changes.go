package server

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/stratadb/strata/api"
	"github.com/stratadb/strata/table"
)

// changes answers GET …/changes?from=A[&to=B]: the rows versions A+1
// through B (the latest by default) inserted and deleted
// (table.Changes), each with its _change and _version columns, as Arrow
// or JSON lines, under the memory budget as a scan is. The Strata-Version
// header names the version read through: a consumer that stores it asks
// from there next time, and so reads every row once. A range whose first
// version garbage collection removed is 410 version_collected, naming the
// oldest version left. An Arrow answer carries the schema of version B
// (with the two columns); a range across an overwrite that changed the
// schema is read as JSON lines.
func (s *Server) changes(w http.ResponseWriter, r *http.Request, t *tableState) error {
	q := r.URL.Query()
	from, err := strconv.ParseUint(q.Get("from"), 10, 64)
	if err != nil {
		return badRequest("changes need from=VERSION, the version they come after (0: the table's creation)")
	}
	latest, err := table.LatestVersion(r.Context(), t.b)
	if err != nil {
		return err
	}
	to := latest
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
	opts := table.ChangesOptions{BatchSize: scanBatchRows, Parallelism: scanParallelism, ReadAheadBytes: scanReadAhead}
	if c := q.Get("columns"); c != "" {
		if opts.Columns, err = table.ParseColumns(c); err != nil {
			return badRequest("%v", err)
		}
	}
	limit := int64(-1)
	if l, ok := intQuery(r, "limit"); ok {
		limit = l
	}
	m, err := table.ReadManifest(r.Context(), t.b, to)
	if err != nil {
		return err
	}
	schema, err := table.NewSnapshot(t.b, m).ScanSchema(table.ScanOptions{Columns: opts.Columns})
	if err != nil {
		return badRequest("%v", err)
	}
	schema = arrow.NewSchema(append(schema.Fields(),
		arrow.Field{Name: table.ChangeColumn, Type: arrow.BinaryTypes.String},
		arrow.Field{Name: table.VersionColumn, Type: arrow.PrimitiveTypes.Uint64}), nil)
	holds := s.budget.newHolds()
	opts.Memory = &scanMemory{b: s.budget}
	release, err := holds.hold(r.Context(), scanHold)
	if err != nil {
		return err
	}
	defer release()
	rows := func(yield func(arrow.RecordBatch, error) bool) {
		for c, err := range table.Changes(r.Context(), t.b, from, to, opts) {
			var gone *table.ChangesCollectedError
			if errors.As(err, &gone) {
				err = &apiError{http.StatusGone, api.CodeVersionCollected, gone.Error()}
			}
			if err != nil {
				yield(nil, err)
				return
			}
			rec := table.WithChangeColumns(c, nil)
			more := yield(rec, nil)
			rec.Release()
			if !more {
				return
			}
		}
	}
	w.Header().Set("Strata-Version", strconv.FormatUint(to, 10))
	return s.writeRows(w, r, schema, limit, rows)
}
