package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/stratadb/strata/api"
	"github.com/stratadb/strata/engine"
	"github.com/stratadb/strata/internal/ingest"
	"github.com/stratadb/strata/table/evolve"
	"github.com/stratadb/strata/table/format"
)

// Requests that carry rows (an append, a create with rows) may be named
// so that sending one again after losing its answer is safe: with
// Idempotency-Key (a key of the caller's, for one request), or with
// Strata-Producer and Strata-Sequence (a client instance numbering its
// requests: the server remembers a few numbers per producer rather than a
// record per request). A request whose name the table or the server's
// shard records answers the first one's outcome with Idempotent-Replayed:
// true and stores nothing; the same name with another body is refused
// (422 idempotency_key_reused). See docs/format.md, "Idempotent appends".

// requestKey reads a request's name; nil when it has none. The digest is
// the body's, filled in once the body is read (see digestBody).
func requestKey(r *http.Request) (*format.Idempotency, error) {
	key := r.Header.Get(api.HeaderIdempotencyKey)
	producer, seq := r.Header.Get(api.HeaderProducer), r.Header.Get(api.HeaderSequence)
	var k format.Idempotency
	switch {
	case key != "" && (producer != "" || seq != ""):
		return nil, badRequest("give %s, or %s with %s, not both", api.HeaderIdempotencyKey, api.HeaderProducer, api.HeaderSequence)
	case key != "":
		k.Producer = "key:" + key
	case producer != "" && seq != "":
		n, err := strconv.ParseUint(seq, 10, 64)
		if err != nil {
			return nil, badRequest("%s: %q is not a sequence number", api.HeaderSequence, seq)
		}
		k.Producer, k.Seq = "producer:"+producer, n
	case producer != "" || seq != "":
		return nil, badRequest("%s and %s go together", api.HeaderProducer, api.HeaderSequence)
	default:
		return nil, nil
	}
	switch {
	case key != "" && len(key) > api.MaxIdempotencyKeyBytes:
		return nil, badRequest("%s is %d bytes; at most %d", api.HeaderIdempotencyKey, len(key), api.MaxIdempotencyKeyBytes)
	case producer != "" && len(producer) > api.MaxProducerBytes:
		return nil, badRequest("%s is %d bytes; at most %d", api.HeaderProducer, len(producer), api.MaxProducerBytes)
	}
	return &k, nil
}

// digestBody makes r's body digested as it is read; done reads what the
// decoder left and returns the digest (never 0: 0 asks for the rows').
func digestBody(r *http.Request) (done func() (uint64, error)) {
	body, sum := format.BodyDigest(r.Body)
	r.Body = io.NopCloser(body)
	return func() (uint64, error) {
		if _, err := io.Copy(io.Discard, body); err != nil {
			return 0, err
		}
		return max(sum(), 1), nil
	}
}

// replayed marks an answer that repeats a first request's outcome.
func replayed(w http.ResponseWriter) { w.Header().Set(api.HeaderReplayed, "true") }

func (s *Server) createTable(w http.ResponseWriter, r *http.Request) (err error) {
	t, err := s.table(r.Context(), r.PathValue("name"), true)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			s.forgetIfMissing(t)
		}
	}()
	key, err := requestKey(r)
	if err != nil {
		return err
	}
	var schema *arrow.Schema
	var batches []arrow.RecordBatch
	switch mediaType(r) {
	case ArrowStream:
		release, err := s.budget.write(r.Context(), s.bodyReserve(r))
		if err != nil {
			return err
		}
		defer release()
		digest := digestBody(r)
		// Rows given with the schema are checked as an append's are.
		if schema, batches, err = ingest.ReadIPC(r.Body, nil, s.ingestOptions(r)); err != nil {
			return err
		}
		defer ingest.Release(batches)
		if key != nil {
			if key.Digest, err = digest(); err != nil {
				return badRequestOrLimit(err, "reading the body")
			}
		}
	case api.JSON:
		digest := digestBody(r)
		if schema, err = readJSONSchema(r); err != nil {
			return err
		}
		if key != nil {
			if key.Digest, err = digest(); err != nil {
				return badRequestOrLimit(err, "reading the body")
			}
		}
	default:
		return unsupportedMedia(ArrowStream, api.JSON)
	}
	if err := s.checkPlacement(r.Context(), t); err != nil {
		return err
	}
	m, dup, err := engine.Create(r.Context(), t.b, schema, "server:"+s.opts.Instance, key, batches...)
	if err != nil {
		return err
	}
	if dup {
		replayed(w)
	}
	writeJSON(w, http.StatusCreated, info(t.name, m))
	return nil
}

// readJSONSchema reads a create's JSON schema.
func readJSONSchema(r *http.Request) (*arrow.Schema, error) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return nil, badRequestOrLimit(err, "reading the schema")
	}
	// A name the decoder would turn into U+FFFD would name a column
	// other than the one asked for.
	if at, why := ingest.InvalidText(body); why != "" {
		return nil, badRequest("body is not a JSON schema: %s at byte %d", why, at)
	}
	var sj api.Schema
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&sj); err != nil {
		return nil, badRequestOrLimit(err, "body is not a JSON schema")
	}
	schema, err := sj.ToArrow()
	if err != nil {
		return nil, badRequest("%v", err)
	}
	return schema, nil
}

// appendRows appends an Arrow IPC stream or JSON lines through the
// server's shard, answering once the rows are durable. A request is all
// or nothing: its rows are decoded and checked in full (see package
// ingest) before any is written, and then go into one WAL entry.
func (s *Server) appendRows(w http.ResponseWriter, r *http.Request, t *tableState) error {
	var keys []string
	mode := r.URL.Query().Get("mode")
	if err := upsertParams(r, mode); err != nil {
		return err
	}
	switch mode {
	case "", "append":
	case "overwrite":
		return s.overwriteRows(w, r, t)
	case "upsert":
		var err error
		if keys, err = upsertKeys(r); err != nil {
			return err
		}
		clauses, withClauses, err := upsertClauses(r)
		if err != nil {
			return err
		}
		switch through := r.URL.Query().Get("through"); through {
		case "", "table":
			if withClauses {
				return s.upsertWithRows(w, r, t, keys, clauses)
			}
			return s.upsertRows(w, r, t, keys)
		case "shard":
			// Acknowledged once in the server's shard, as an append; the
			// merge replaces the rows with its keys.
			if withClauses {
				return badRequest("an upsert with when_… clauses commits to the table (through=table): a shard's upserts replace their keys' rows, and nothing else")
			}
		default:
			return badRequest("through=%q: want table (the default: one commit) or shard", through)
		}
	default:
		return badRequest("mode=%q: want append (the default), upsert or overwrite", mode)
	}
	key, err := requestKey(r)
	if err != nil {
		return err
	}
	sh, err := t.db.Shard(r.Context())
	if err != nil {
		return err
	}
	release, err := s.budget.write(r.Context(), s.bodyReserve(r))
	if err != nil {
		return err
	}
	defer release()
	var digest func() (uint64, error)
	if key != nil {
		digest = digestBody(r)
	}
	var recs []arrow.RecordBatch
	switch mediaType(r) {
	case ArrowStream:
		_, recs, err = ingest.ReadIPC(r.Body, sh.Schema(), s.ingestOptions(r))
	case NDJSON, "application/jsonl":
		recs, err = ingest.ReadJSONLines(r.Body, sh.Schema(), s.ingestOptions(r))
	default:
		return unsupportedMedia(ArrowStream, NDJSON)
	}
	if errors.Is(err, evolve.ErrBadInput) {
		// Rows the shard refuses may fit the table since a schema change
		// by another process (a column it does not know, one made
		// nullable): the shard opens again under it, and the rows are
		// sent again.
		if renewed, rerr := t.db.RenewSchema(r.Context()); rerr == nil && renewed {
			return &apiError{http.StatusServiceUnavailable, api.CodeUnavailable,
				"the table's schema changed since this server opened its shard; send the rows again (" + err.Error() + ")"}
		}
	}
	if err != nil {
		return err
	}
	defer ingest.Release(recs)
	if key != nil {
		if key.Digest, err = digest(); err != nil {
			return badRequestOrLimit(err, "reading the body")
		}
	}
	appendStart := time.Now()
	ack, err := t.db.Append(r.Context(), engine.AppendOptions{Key: key, Conformed: true, Keys: keys}, recs...)
	if err != nil {
		return err
	}
	res := api.AppendResult{Rows: ack.Rows, Shard: ack.Shard, Position: ack.Position, Duplicate: ack.Duplicate}
	if ack.Duplicate {
		replayed(w)
	}
	if !res.Duplicate {
		s.metrics.appendSeconds.Observe(time.Since(appendStart).Seconds())
		s.metrics.rowsAppended.Add(float64(res.Rows))
	}
	writeJSON(w, http.StatusOK, res)
	return nil
}

// upsertParams refuses an upsert's parameters on a request of another
// mode, which would be ignored.
func upsertParams(r *http.Request, mode string) error {
	if mode == "upsert" {
		return nil
	}
	if through := r.URL.Query().Get("through"); r.URL.Query().Has("through") && (mode == "overwrite" || through != "shard") {
		// An append goes through the server's shard: through=shard says
		// so, anything else would be ignored.
		return badRequest("through=%q: an append goes through the server's shard (through=shard), an overwrite to the table; through=table is an upsert's (mode=upsert)", through)
	}
	for _, p := range []string{"key", "when_matched", "when_matched_if", "when_not_matched", "when_not_matched_by_source", "when_not_matched_by_source_if"} {
		if r.URL.Query().Has(p) {
			return badRequest("%s= is an upsert's: give mode=upsert (or leave %s= out)", p, p)
		}
	}
	return nil
}

// ingestOptions bounds the decoding of a request's rows by the body limit;
// ignore_unknown=true drops columns the table does not have.
func (s *Server) ingestOptions(r *http.Request) ingest.Options {
	return ingest.Options{Limit: s.opts.MaxBodyBytes, IgnoreUnknown: r.URL.Query().Get("ignore_unknown") == "true"}
}
