package server

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/cespare/xxhash/v2"

	"github.com/stratadb/strata/api"
	"github.com/stratadb/strata/engine"
	"github.com/stratadb/strata/internal/ingest"
	"github.com/stratadb/strata/table/format"
)

// upsertRows answers POST …/rows?mode=upsert&key=COL[,COL]: the rows are
// written and, in the same commit, every row of the table with one of
// their keys is deleted (engine.DB.Upsert). It commits to the table
// directly; the server's own shard is drained first, so that rows it
// acknowledged before are replaced too (rows of other writers not yet
// merged are not). A named upsert (Idempotency-Key, or Strata-Producer
// with Strata-Sequence) is recorded in the table: sent again, to this
// server or another, it answers the first one's version and replaces
// nothing, so that it never undoes a later upsert of its keys. With
// through=shard the rows go through the server's shard instead
// (appendRows).
func (s *Server) upsertRows(w http.ResponseWriter, r *http.Request, t *tableState, keys []string) error {
	var recs []arrow.RecordBatch
	var lines ingest.Lines
	defer func() { ingest.Release(recs) }()
	read, release, err := s.directRows(r, &recs, &lines, fmt.Sprintf("upsert %q", keys))
	if err != nil {
		return err
	}
	defer release()
	// The engine drains the server's shard first: the rows the server
	// acknowledged are in the table the upsert reads.
	res, err := t.db.Upsert(r.Context(), keys, read)
	err = ingest.AtLine(err, &lines)
	if err != nil {
		return err
	}
	if res.Duplicate {
		replayed(w)
		res.Inserted = res.Rows
	}
	writeJSON(w, http.StatusOK, api.AppendResult{Rows: res.Inserted, Version: res.Version, Replaced: res.Replaced, Duplicate: res.Duplicate})
	return nil
}

// upsertClauses reads an upsert's when_… parameters (see the OpenAPI
// document); given is false when none is (a plain upsert).
func upsertClauses(r *http.Request) (c engine.UpsertClauses, given bool, err error) {
	q := r.URL.Query()
	c = engine.UpsertClauses{UpdateMatched: true, InsertUnmatched: true}
	for _, p := range []string{"when_matched", "when_matched_if", "when_not_matched", "when_not_matched_by_source", "when_not_matched_by_source_if"} {
		given = given || q.Has(p)
	}
	choose := func(name, yes, no string, to *bool) error {
		switch v := q.Get(name); v {
		case "":
		case yes:
			*to = true
		case no:
			*to = false
		default:
			return badRequest("%s=%q: want %s or %s", name, v, yes, no)
		}
		return nil
	}
	if err := errors.Join(choose("when_matched", "update", "ignore", &c.UpdateMatched),
		choose("when_not_matched", "insert", "ignore", &c.InsertUnmatched),
		choose("when_not_matched_by_source", "delete", "keep", &c.DeleteUnmatchedBySource)); err != nil {
		return c, given, err
	}
	c.MatchedIf, c.BySourceIf = q.Get("when_matched_if"), q.Get("when_not_matched_by_source_if")
	if c.MatchedIf != "" && !c.UpdateMatched {
		return c, given, badRequest("when_matched_if= conditions an update: not with when_matched=ignore")
	}
	if c.BySourceIf != "" && !c.DeleteUnmatchedBySource {
		return c, given, badRequest("when_not_matched_by_source_if= conditions a delete: give when_not_matched_by_source=delete")
	}
	return c, given, nil
}

// upsertWithRows answers POST …/rows?mode=upsert&key=…&when_…: an upsert
// as its clauses say, in one commit (engine.DB.UpsertWith), named as an
// upsert is.
func (s *Server) upsertWithRows(w http.ResponseWriter, r *http.Request, t *tableState, keys []string, c engine.UpsertClauses) error {
	var recs []arrow.RecordBatch
	var lines ingest.Lines
	defer func() { ingest.Release(recs) }()
	read, release, err := s.directRows(r, &recs, &lines, fmt.Sprintf("upsert %q %+v", keys, c))
	if err != nil {
		return err
	}
	defer release()
	res, err := t.db.UpsertWith(r.Context(), keys, c, read)
	err = ingest.AtLine(err, &lines)
	if err != nil {
		return err
	}
	rows := res.Inserted + res.Updated
	if res.Duplicate {
		replayed(w)
		rows = res.Rows // the first one's
	}
	writeJSON(w, http.StatusOK, api.AppendResult{Rows: rows, Version: res.Version, Replaced: res.Replaced,
		Inserted: res.Inserted, Updated: res.Updated, Deleted: res.Deleted, Duplicate: res.Duplicate})
	return nil
}

// overwriteRows answers POST …/rows?mode=overwrite: the rows replace every
// row of the table, keeping its schema, in one commit
// (engine.DB.Overwrite). The server's own shard is drained first, so that
// rows it acknowledged before are replaced too (rows of other writers not
// yet merged land on top). A named overwrite is recorded in the table:
// sent again, to this server or another, it answers the first one's
// version and overwrites nothing, so that it never drops rows written
// after it.
func (s *Server) overwriteRows(w http.ResponseWriter, r *http.Request, t *tableState) error {
	var recs []arrow.RecordBatch
	var lines ingest.Lines
	defer func() { ingest.Release(recs) }()
	read, release, err := s.directRows(r, &recs, &lines, "overwrite")
	if err != nil {
		return err
	}
	defer release()
	res, err := t.db.Overwrite(r.Context(), read)
	err = ingest.AtLine(err, &lines)
	if err != nil {
		return err
	}
	if res.Duplicate {
		replayed(w)
	}
	writeJSON(w, http.StatusOK, api.AppendResult{Rows: res.Rows, Version: res.Version, Duplicate: res.Duplicate})
	return nil
}

// directRows is how a write committed to the table directly (an upsert,
// an overwrite) reads its rows from r's body — Arrow IPC or JSON lines,
// under the table's schema, into *recs for the caller to release, the
// lines of JSON lines' rows into lines — and
// its name (requestKey), whose digest covers the body and what (the kind
// of write and what else defines it: the same rows upserted by other
// columns are another write). release gives back the body's share of the
// write budget.
func (s *Server) directRows(r *http.Request, recs *[]arrow.RecordBatch, lines *ingest.Lines, what string) (read engine.RowsReader, release func(), err error) {
	switch mediaType(r) {
	case ArrowStream, NDJSON, "application/jsonl":
	default:
		return nil, nil, unsupportedMedia(ArrowStream, NDJSON)
	}
	key, err := requestKey(r)
	if err != nil {
		return nil, nil, err
	}
	if release, err = s.budget.write(r.Context(), s.bodyReserve(r)); err != nil {
		return nil, nil, err
	}
	return func(schema *arrow.Schema) ([]arrow.RecordBatch, *format.Idempotency, error) {
		var digest func() (uint64, error)
		if key != nil {
			digest = digestBody(r)
		}
		var err error
		switch mediaType(r) {
		case ArrowStream:
			_, *recs, err = ingest.ReadIPC(r.Body, schema, s.ingestOptions(r))
		default:
			o := s.ingestOptions(r)
			o.Lines = lines // a row refused later is named by its line
			*recs, err = ingest.ReadJSONLines(r.Body, schema, o)
		}
		if err != nil {
			return nil, nil, err
		}
		if key != nil {
			if key.Digest, err = digest(); err != nil {
				return nil, nil, badRequestOrLimit(err, "reading the body")
			}
			key.Digest = max(xxhash.Sum64String(fmt.Sprintf("%016x %s", key.Digest, what)), 1)
		}
		return *recs, key, nil
	}, release, nil
}

// upsertKeys reads an upsert's key=COL[,COL].
func upsertKeys(r *http.Request) ([]string, error) {
	var keys []string
	for _, k := range strings.Split(r.URL.Query().Get("key"), ",") {
		if k = strings.TrimSpace(k); k != "" {
			keys = append(keys, k)
		}
	}
	if len(keys) == 0 {
		return nil, badRequest("mode=upsert needs key=: the column (or columns, comma-separated) that identify a row")
	}
	return keys, nil
}
