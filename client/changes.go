package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/stratadb/strata/api"
)

// ChangesOptions say which changes to ask for (GET …/changes).
type ChangesOptions struct {
	// From is the version the changes come after (0: the table's
	// creation); with Consumer and no From, the consumer's position.
	From     uint64
	Consumer string
	To       uint64 // the last version (0: the latest)
	// FromAsOf and ToAsOf name the bounds by time, as ScanOptions.AsOf
	// does (instead of From and To): the changes after the version as of
	// FromAsOf (the table's creation when it was made after it), through
	// the version as of ToAsOf.
	FromAsOf, ToAsOf time.Time
	// Wait, when no version is past From, waits up to this long (at most
	// a minute) for one: a long poll.
	Wait    time.Duration
	Columns []string
	// Filter keeps the changed rows it matches (a delete by the values it
	// deleted): a filter as a scan takes.
	Filter string
}

// Changes returns the rows the versions after o.From (through o.To)
// inserted and deleted, each with its _change ("insert" or "delete") and
// _version columns, and the version they were read through: ask from it
// next time to read every change once. The caller releases the batches.
// A range whose start garbage collection removed is a 410
// (version_collected) *Error naming the oldest version left.
func (c *Client) Changes(ctx context.Context, name string, o ChangesOptions) ([]arrow.RecordBatch, uint64, error) {
	q := url.Values{}
	if !o.FromAsOf.IsZero() {
		q.Set("from_as_of", o.FromAsOf.UTC().Format(time.RFC3339Nano))
	} else if o.Consumer == "" || o.From != 0 {
		q.Set("from", strconv.FormatUint(o.From, 10))
	}
	if !o.ToAsOf.IsZero() {
		q.Set("to_as_of", o.ToAsOf.UTC().Format(time.RFC3339Nano))
	}
	if o.Consumer != "" {
		q.Set("consumer", o.Consumer)
	}
	if o.To != 0 {
		q.Set("to", strconv.FormatUint(o.To, 10))
	}
	if o.Wait > 0 {
		q.Set("wait", o.Wait.String())
	}
	if len(o.Columns) > 0 {
		q.Set("columns", api.ColumnList(o.Columns))
	}
	if o.Filter != "" {
		q.Set("filter", o.Filter)
	}
	r := c.call(ctx, http.MethodGet, c.url(name, "/changes", q), "", nil, api.ArrowStream)
	var through uint64
	if r.err == nil {
		through, _ = strconv.ParseUint(r.resp.Header.Get("Strata-Version"), 10, 64)
	}
	recs, err := collect(r.stream)
	return recs, through, err
}

// SetConsumer records that the named consumer has read every change
// through version (PUT …/consumers/{consumer}); garbage collection keeps
// the versions after it for the consumer retention.
func (c *Client) SetConsumer(ctx context.Context, name, consumer string, version uint64) (api.Consumer, error) {
	body, _ := jsonBody(api.ConsumerRequest{Version: version})
	var out api.Consumer
	err := c.call(ctx, http.MethodPut, c.url(name, "/consumers/"+url.PathEscape(consumer), nil), api.JSON, body, "").json(&out)
	return out, err
}

// Consumers lists the table's named consumers with their lag.
func (c *Client) Consumers(ctx context.Context, name string) ([]api.Consumer, error) {
	var out []api.Consumer
	err := c.call(ctx, http.MethodGet, c.url(name, "/consumers", nil), "", nil, "").json(&out)
	return out, err
}

// DeleteConsumer forgets a named consumer.
func (c *Client) DeleteConsumer(ctx context.Context, name, consumer string) error {
	return c.call(ctx, http.MethodDelete, c.url(name, "/consumers/"+url.PathEscape(consumer), nil), "", nil, "").none()
}

// GroupOptions shape a consumer group member's read (GroupChanges).
type GroupOptions struct {
	// Ack is the previous read's ack, once done with its rows: the group
	// records it.
	Ack string
	// Wait, when nothing is new in the member's share, waits up to this
	// long for it (at most a minute, and half the lease).
	Wait time.Duration
	// Lease is how long the member's claim lasts without a read (0: the
	// server's 60s).
	Lease   time.Duration
	Columns []string
	Filter  string
}

// GroupChanges reads member's share of consumer group's changes (GET
// …/changes?group=): the rows of the units of change its partitions hold
// after their positions, each with _change, _version and _unit, and the
// ack to send back with the next read once done with them ("" when the
// answer covers nothing). The caller releases the batches. A read cut
// short is not acknowledged: its units come again.
func (c *Client) GroupChanges(ctx context.Context, name, group, member string, o GroupOptions) ([]arrow.RecordBatch, string, error) {
	q := url.Values{"group": {group}, "member": {member}}
	if o.Ack != "" {
		q.Set("ack", o.Ack)
	}
	if o.Wait > 0 {
		q.Set("wait", o.Wait.String())
	}
	if o.Lease > 0 {
		q.Set("lease", o.Lease.String())
	}
	if len(o.Columns) > 0 {
		q.Set("columns", api.ColumnList(o.Columns))
	}
	if o.Filter != "" {
		q.Set("filter", o.Filter)
	}
	r := c.call(ctx, http.MethodGet, c.url(name, "/changes", q), "", nil, api.ArrowStream)
	var ack string
	if r.err == nil {
		ack = r.resp.Header.Get("Strata-Group-Ack")
	}
	recs, err := collect(r.stream)
	if err != nil {
		return nil, "", err
	}
	return recs, ack, nil
}

// LeaveGroup drops member from consumer group (DELETE
// …/groups/{group}/members/{member}): its partitions go to the others at
// once.
func (c *Client) LeaveGroup(ctx context.Context, name, group, member string) error {
	return c.call(ctx, http.MethodDelete, c.url(name, "/groups/"+url.PathEscape(group)+"/members/"+url.PathEscape(member), nil), "", nil, "").none()
}

// DeleteGroup deletes consumer group's positions (DELETE …/groups/{group});
// stop its members first.
func (c *Client) DeleteGroup(ctx context.Context, name, group string) error {
	return c.call(ctx, http.MethodDelete, c.url(name, "/groups/"+url.PathEscape(group), nil), "", nil, "").none()
}
