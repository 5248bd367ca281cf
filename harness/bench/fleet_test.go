package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stratadb/strata/harness/latencyproxy"
	"github.com/stratadb/strata/harness/testenv"
)

// A fleet on MinIO behind a store that answers 503 SlowDown beyond 25
// writes and 40 reads a second (S3's per-prefix rate, scaled to 12
// writers): the clients back off and slow down, no append fails, no merge
// gives up, and every acknowledged row is in the table once (Run fails
// otherwise). The line carries the cost model.
func TestAFleetConvergesUnderThrottling(t *testing.T) {
	srv := testenv.MinIO(t)
	p, err := latencyproxy.New(srv.Endpoint, 5*time.Millisecond, 0)
	if err != nil {
		t.Fatal(err)
	}
	p.WritesPerSecond, p.ReadsPerSecond = 25, 40
	front := httptest.NewServer(p)
	t.Cleanup(front.Close)
	cfg := Config{Mode: "fleet", Store: "s3", S3Endpoint: front.URL, S3Bucket: srv.Bucket,
		Writers: 12, Rows: 20, Duration: 8 * time.Second, MergeInterval: 2 * time.Second}
	var out, log bytes.Buffer
	if err := Run(context.Background(), cfg, &out, &log); err != nil {
		t.Fatalf("%v\n%s", err, log.String())
	}
	line := strings.TrimSpace(out.String())
	var fields map[string]any
	if err := json.Unmarshal([]byte(line), &fields); err != nil {
		t.Fatalf("line %s: %v", line, err)
	}
	r := map[string]float64{}
	for k, v := range fields {
		if n, ok := v.(float64); ok {
			r[k] = n
		}
	}
	t.Logf("%s\nthe proxy: %d requests, %d slowed down", line, p.Requests(), p.Throttled())
	if p.Throttled() == 0 {
		t.Fatalf("the store never throttled the fleet (%d requests): the test shows nothing", p.Requests())
	}
	if r["rows_acked"] < 12*20 || r["rows_visible"] != r["rows_acked"] || r["append_errors"] != 0 || r["merge_failures"] != 0 {
		t.Fatalf("under throttling: %s", line)
	}
	byKind := r["requests_per_shard_min_put"] + r["requests_per_shard_min_get"] + r["requests_per_shard_min_list"] + r["requests_per_shard_min_delete"]
	if total := r["requests_per_shard_min"]; total <= 0 || byKind < total*0.99 || byKind > total*1.01 || r["s3_usd_per_month_requests"] <= 0 || r["s3_usd_per_month_storage"] <= 0 {
		t.Fatalf("the cost model does not add up (%g by kind, %g in all): %s", byKind, total, line)
	}
	// And by object: every request is counted under the object it
	// touched, the appends' under the WAL, each flush's under its flush
	// object, which the fleet merge reads once.
	byObject, _ := fields["requests_per_shard_min_by_object"].(map[string]any)
	var sum float64
	for _, v := range byObject {
		n, _ := v.(float64)
		sum += n
	}
	// (The two counts are read a moment apart while requests are in
	// flight; TestFleetBucketCountsAsCounted compares them exactly.)
	if total := r["requests_per_shard_min"]; sum < total*0.98 || sum > total*1.02 {
		t.Fatalf("the requests by object do not add up (%g by object, %g in all): %s", sum, total, line)
	}
	for _, k := range []string{"wal/put", "flush/put", "flush/get", "flush/list", "manifest/put"} {
		if n, _ := byObject[k].(float64); n <= 0 {
			t.Fatalf("no %s requests counted: %s", k, line)
		}
	}
	for _, k := range []string{"shard_state/put", "announcement/put"} {
		if n, _ := byObject[k].(float64); n > 0 {
			t.Fatalf("%g %s requests a shard-minute: a flush writes one object: %s", n, k, line)
		}
	}
}
