package client

import (
	"context"
	"net/http"
	"net/url"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/stratadb/strata/api"
)

// Upsert writes the rows and, in the same commit, deletes every row of the
// table whose key — its values in the columns keys — one of them has
// (POST …/rows?mode=upsert; see commit.Table.Upsert). A key must not be
// null nor appear twice among the rows. An upsert sent again replaces its
// own rows, so a transport error, a 503 or an outcome_unknown answer is
// retried (for up to RetryFor), as a named append is. Rows other writers
// appended through shards and not yet merged are not replaced.
func (c *Client) Upsert(ctx context.Context, name string, keys []string, batches ...arrow.RecordBatch) (api.AppendResult, error) {
	q := url.Values{"mode": {"upsert"}, "key": {strings.Join(keys, ",")}}
	return c.postRows(ctx, name, q, http.Header{}, batches)
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
