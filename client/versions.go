package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/stratadb/strata/api"
)

// A table's versions, its tags, and a restore of an earlier version.

// Versions lists versions, newest first.
func (c *Client) Versions(ctx context.Context, name string, limit int, detail bool) ([]api.Version, error) {
	q := url.Values{"limit": {strconv.Itoa(limit)}, "detail": {strconv.FormatBool(detail)}}
	var out []api.Version
	return out, c.call(ctx, http.MethodGet, c.url(name, "/versions", q), "", nil, "").json(&out)
}

// CreateTag names a version (0: the latest).
func (c *Client) CreateTag(ctx context.Context, name, tag string, version uint64) error {
	body, _ := jsonBody(api.TagRequest{Name: tag, Version: version})
	return c.call(ctx, http.MethodPost, c.url(name, "/tags", nil), api.JSON, body, "").none()
}

// DeleteTag removes a tag; an *Error with status 404 says there is none.
func (c *Client) DeleteTag(ctx context.Context, name, tag string) error {
	return c.call(ctx, http.MethodDelete, c.url(name, "/tags/"+url.PathEscape(tag), nil), "", nil, "").none()
}

// Tags lists the tags.
func (c *Client) Tags(ctx context.Context, name string) ([]api.Tag, error) {
	var out []api.Tag
	return out, c.call(ctx, http.MethodGet, c.url(name, "/tags", nil), "", nil, "").json(&out)
}

// Restore commits a new version whose rows are version's (POST
// …/restore); see commit.Table.Restore.
func (c *Client) Restore(ctx context.Context, name string, version uint64) (api.RestoreResult, error) {
	body, _ := jsonBody(api.RestoreRequest{Version: version})
	var out api.RestoreResult
	err := c.call(ctx, http.MethodPost, c.url(name, "/restore", nil), api.JSON, body, "").json(&out)
	return out, err
}

// RestoreAsOf commits a new version whose rows are those of the newest
// version committed at or before at.
func (c *Client) RestoreAsOf(ctx context.Context, name string, at time.Time) (api.RestoreResult, error) {
	body, _ := jsonBody(api.RestoreRequest{AsOf: at.UTC().Format(time.RFC3339Nano)})
	var out api.RestoreResult
	err := c.call(ctx, http.MethodPost, c.url(name, "/restore", nil), api.JSON, body, "").json(&out)
	return out, err
}
