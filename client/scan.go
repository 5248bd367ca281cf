package client

import (
	"context"
	"iter"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/stratadb/strata/api"
)

// ScanOptions shape a scan.
type ScanOptions struct {
	Columns []string
	Filter  string // e.g. "reward >= 0.9 AND worker = 'w01'"
	Version uint64
	Tag     string
	// AsOf reads the newest version committed at or before this time (to
	// the millisecond; GET …/rows?as_of=).
	AsOf  time.Time
	Limit int64
	// Fresh adds the rows acknowledged but not yet merged into the table
	// (GET …/rows?fresh=true); not with Version or Tag. Without it, a scan
	// of the latest version holds every row this client had acknowledged
	// (see Options.IgnoreOwnWrites), from the shards of whichever servers
	// answered, at no cost once they are merged.
	Fresh bool
}

// Scan returns the rows as record batches; the caller releases them. It
// holds the whole answer in memory: ScanIter streams it.
func (c *Client) Scan(ctx context.Context, name string, o ScanOptions) ([]arrow.RecordBatch, error) {
	return collect(c.ScanIter(ctx, name, o))
}

// ScanIter streams the rows: each batch is valid until the loop body
// returns (Retain it to keep it), the next is read from the connection only
// when asked for, and leaving the loop closes the connection. An error ends
// the sequence.
func (c *Client) ScanIter(ctx context.Context, name string, o ScanOptions) iter.Seq2[arrow.RecordBatch, error] {
	q := readQuery(c, name, o)
	if len(o.Columns) > 0 {
		q.Set("columns", api.ColumnList(o.Columns))
	}
	if o.Limit > 0 {
		q.Set("limit", strconv.FormatInt(o.Limit, 10))
	}
	return func(yield func(arrow.RecordBatch, error) bool) {
		c.call(ctx, http.MethodGet, c.url(name, "/rows", q), "", nil, api.ArrowStream).stream(yield)
	}
}

// Count returns how many rows match o.Filter (every row without one) in
// what a scan with the same options reads (o.Columns and o.Limit aside):
// from the table's statistics wherever they decide a fragment
// (GET …/count).
func (c *Client) Count(ctx context.Context, name string, o ScanOptions) (api.CountResult, error) {
	var res api.CountResult
	return res, c.call(ctx, http.MethodGet, c.url(name, "/count", readQuery(c, name, o)), "", nil, "").json(&res)
}

// readQuery is the query of a read with o's filter and version (or
// fresh rows, or the client's own writes).
func readQuery(c *Client, name string, o ScanOptions) url.Values {
	q := url.Values{}
	if o.Filter != "" {
		q.Set("filter", o.Filter)
	}
	if o.Version != 0 {
		q.Set("version", strconv.FormatUint(o.Version, 10))
	}
	if o.Tag != "" {
		q.Set("tag", o.Tag)
	}
	if !o.AsOf.IsZero() {
		q.Set("as_of", o.AsOf.UTC().Format(time.RFC3339Nano))
	}
	if o.Fresh {
		q.Set("fresh", "true")
	}
	if !o.Fresh && o.Version == 0 && o.Tag == "" && o.AsOf.IsZero() {
		c.ownWrites(name, q)
	}
	return q
}
