package client

import (
	"context"
	"fmt"
	"io"
	"net/http"

	"github.com/stratadb/strata/api"
)

// Compact starts a compaction of the table under its lease, in the
// background (202). At most one opts sets what the server's policy would
// otherwise: MinFragments (and compact only when due), TargetRows,
// TargetBytes, Force (ignore the quiet windows); the fields set are sent
// as JSON, as the Python client sends them, and without any there is no
// body. An *Error with status 409 says another compactor holds the lease,
// or the compaction is not due. DryRun asks for a plan, which Compact
// discards: PlanCompaction returns it.
func (c *Client) Compact(ctx context.Context, name string, opts ...api.CompactRequest) error {
	body, ctype, err := compactBody(opts)
	if err != nil {
		return err
	}
	return c.call(ctx, http.MethodPost, c.url(name, "/compact", nil), ctype, body, "").none()
}

// PlanCompaction returns what a compaction with opts would do (a dry run:
// nothing changes).
func (c *Client) PlanCompaction(ctx context.Context, name string, opts api.CompactRequest) (api.CompactPlan, error) {
	opts.DryRun = true
	var plan api.CompactPlan
	body, ctype, err := compactBody([]api.CompactRequest{opts})
	if err != nil {
		return plan, err
	}
	return plan, c.call(ctx, http.MethodPost, c.url(name, "/compact", nil), ctype, body, "").json(&plan)
}

// compactBody is the body of POST …/compact: none without options.
func compactBody(opts []api.CompactRequest) (func() io.Reader, string, error) {
	switch {
	case len(opts) > 1:
		return nil, "", fmt.Errorf("client: Compact takes at most one api.CompactRequest, got %d", len(opts))
	case len(opts) == 0 || opts[0] == (api.CompactRequest{}):
		return nil, "", nil
	}
	body, err := jsonBody(opts[0])
	return body, api.JSON, err
}

// CompactStats returns the compaction status and history.
func (c *Client) CompactStats(ctx context.Context, name string) (api.CompactStats, error) {
	var out api.CompactStats
	return out, c.call(ctx, http.MethodGet, c.url(name, "/compact/stats", nil), "", nil, "").json(&out)
}

// GC collects the table's garbage (POST …/gc): old versions and the
// objects only they use, with the collector's safety rules (the newest
// KeepVersions versions, those younger than Retain, tagged versions and
// what named consumers have not read are kept). Fields left zero take the
// collector's defaults; DryRun reports what would go, in Plan.
func (c *Client) GC(ctx context.Context, name string, o api.GCRequest) (api.GCResult, error) {
	body, err := jsonBody(o)
	if err != nil {
		return api.GCResult{}, err
	}
	var out api.GCResult
	return out, c.call(ctx, http.MethodPost, c.url(name, "/gc", nil), api.JSON, body, "").json(&out)
}
