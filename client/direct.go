package client

import (
	"bytes"
	"context"
	"io"
	"maps"
	"math"
	"net/http"
	"net/url"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/stratadb/strata/api"
)

// Upsert writes the rows and, in the same commit, deletes every row of the
// table whose key — its values in the columns keys — one of them has
// (POST …/rows?mode=upsert; see commit.Table.Upsert). A key must not be
// null nor appear twice among the rows. It is named as Append is, so a
// transport error, a 503 or an outcome_unknown answer is retried (for up
// to RetryFor) and the retry changes nothing once the first landed: it
// never undoes a later upsert of its keys. Rows other writers appended
// through shards and not yet merged are not replaced.
func (c *Client) Upsert(ctx context.Context, name string, keys []string, batches ...arrow.RecordBatch) (api.AppendResult, error) {
	reqName, done := c.nextName()
	defer done()
	q := url.Values{"mode": {"upsert"}, "key": {strings.Join(keys, ",")}}
	return c.postRows(ctx, name, q, reqName, batches)
}

// UpsertClauses are the clauses of an upsert (UpsertWith); the zero value
// is an upsert's: update every matched key's rows, insert the others.
type UpsertClauses struct {
	IgnoreMatched bool   // leave the rows of the keys the table has
	MatchedIf     string // update only where this holds of the pair (target.COL, source.COL)
	IgnoreNew     bool   // do not insert the rows whose key the table lacks
	// DeleteMissing deletes the table's rows whose key the rows lack
	// (where MissingIf, given, holds of them).
	DeleteMissing bool
	MissingIf     string
}

// UpsertWith writes the rows into the table by the key columns keys, as
// the clauses say, in one commit (POST …/rows?mode=upsert&when_…; see
// commit.Table.UpsertWith): the answer counts the rows inserted,
// updated, and deleted for their key's absence. It is named as Append is:
// sent again after a lost answer it changes nothing (Duplicate set), so
// that a retry never deletes rows written after it landed. With no rows,
// it deletes every row when DeleteMissing says so.
func (c *Client) UpsertWith(ctx context.Context, name string, keys []string, m UpsertClauses, batches ...arrow.RecordBatch) (api.AppendResult, error) {
	reqName, done := c.nextName()
	defer done()
	q := url.Values{"mode": {"upsert"}, "key": {strings.Join(keys, ",")},
		"when_matched": {"update"}, "when_not_matched": {"insert"}, "when_not_matched_by_source": {"keep"}}
	if m.IgnoreMatched {
		q.Set("when_matched", "ignore")
	}
	if m.IgnoreNew {
		q.Set("when_not_matched", "ignore")
	}
	if m.DeleteMissing {
		q.Set("when_not_matched_by_source", "delete")
	}
	if m.MatchedIf != "" {
		q.Set("when_matched_if", m.MatchedIf)
	}
	if m.MissingIf != "" {
		q.Set("when_not_matched_by_source_if", m.MissingIf)
	}
	return c.postDirect(ctx, name, q, reqName, batches)
}

// postDirect posts the rows of a write committed directly (an overwrite,
// an upsert with clauses), named by reqName: with no rows, an empty body
// of JSON lines, which such a write means as it says.
func (c *Client) postDirect(ctx context.Context, name string, q url.Values, reqName http.Header, batches []arrow.RecordBatch) (api.AppendResult, error) {
	if len(batches) > 0 {
		return c.postRows(ctx, name, q, reqName, batches)
	}
	var out api.AppendResult
	empty := func() io.Reader { return bytes.NewReader(nil) }
	err := c.callNamed(ctx, http.MethodPost, c.url(name, "/rows", q), api.NDJSON, empty, "", reqName).json(&out)
	c.wrote(name, out)
	return out, err
}

// UpsertThroughShard is Upsert through the server's WAL shard
// (POST …/rows?mode=upsert&through=shard): the rows are acknowledged once
// durable there, as an append's (the answer names the shard, not a
// version), a fresh scan shows one row per key at once, and the shard's
// merge replaces the table's rows with their keys. A shard's upserts
// replace each other in the order they were acknowledged; across shards
// and direct upserts, the upsert merged or committed last wins. Sent
// again after a lost answer it stores nothing twice (it is named as
// Append is).
func (c *Client) UpsertThroughShard(ctx context.Context, name string, keys []string, batches ...arrow.RecordBatch) (api.AppendResult, error) {
	q := url.Values{"mode": {"upsert"}, "key": {strings.Join(keys, ",")}, "through": {"shard"}}
	return c.postRows(ctx, name, q, http.Header{}, batches)
}

// Overwrite replaces every row of the table with batches (none: the table
// is left empty), keeping its schema, in one commit (POST
// …/rows?mode=overwrite; see commit.Table.OverwriteRows). It is named as
// Append is, so that sent again after a lost answer it overwrites
// nothing (Duplicate set) and never drops rows written after it landed.
// Rows other writers acknowledged through shards and not yet merged land
// on top of it.
func (c *Client) Overwrite(ctx context.Context, name string, batches ...arrow.RecordBatch) (api.AppendResult, error) {
	reqName, done := c.nextName()
	defer done()
	return c.postDirect(ctx, name, url.Values{"mode": {"overwrite"}}, reqName, batches)
}

// Update sets columns of the rows matching filter (required) to the
// values of set (numbers, NaN and the infinities too, strings, booleans,
// nil for null), in one commit
// (PATCH …/rows; see commit.Table.Update), and says how many rows changed.
func (c *Client) Update(ctx context.Context, name, filter string, set map[string]any) (api.UpdateResult, error) {
	body, err := jsonBody(api.UpdateRequest{Set: finiteJSON(set)})
	if err != nil {
		return api.UpdateResult{}, err
	}
	var out api.UpdateResult
	return out, c.call(ctx, http.MethodPatch, c.url(name, "/rows", url.Values{"filter": {filter}}), api.JSON, body, "").json(&out)
}

// UpdateSQL sets columns of the rows filter matches to what setSQL says,
// in one commit: assignments as `strata update --set` takes them, each a
// constant or an expression over the row's columns as it was before the
// update ("reward = reward * 2, step = step + 1").
func (c *Client) UpdateSQL(ctx context.Context, name, filter, setSQL string) (api.UpdateResult, error) {
	body, err := jsonBody(api.UpdateRequest{SetSQL: setSQL})
	if err != nil {
		return api.UpdateResult{}, err
	}
	var out api.UpdateResult
	return out, c.call(ctx, http.MethodPatch, c.url(name, "/rows", url.Values{"filter": {filter}}), api.JSON, body, "").json(&out)
}

// finiteJSON is set with NaN and the infinities, which JSON has no number
// for, written as the strings "NaN", "Infinity" and "-Infinity" that a
// float column takes.
func finiteJSON(set map[string]any) map[string]any {
	var out map[string]any
	for k, v := range set {
		var f float64
		switch x := v.(type) {
		case float64:
			f = x
		case float32:
			f = float64(x)
		default:
			continue
		}
		var w string
		switch {
		case math.IsNaN(f):
			w = "NaN"
		case math.IsInf(f, 1):
			w = "Infinity"
		case math.IsInf(f, -1):
			w = "-Infinity"
		default:
			continue
		}
		if out == nil {
			out = maps.Clone(set)
		}
		out[k] = w
	}
	if out == nil {
		return set
	}
	return out
}
