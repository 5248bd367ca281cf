package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stratadb/strata/client"
	"github.com/stratadb/strata/harness/testenv"
)

// Two strata serve replicas (each its own shard) on one MinIO bucket,
// behind a proxy that alternates them and drops about 5% of the answers
// after the replica acted on the request: every retry reaches the other
// replica. Each acknowledged append is stored once after the merges, and
// an upsert sent again after a later upsert of its key changes nothing,
// whether it went into the table or through a replica's shard.
func TestRetriesOnTheOtherReplicaStoreEachRowOnce(t *testing.T) {
	t.Parallel() // it waits on processes most of its time: it runs beside the others (not beside a test that stops MinIO)
	minio := testenv.MinIO(t)
	bucket := minio.URL(t)
	var backends []string
	for _, name := range []string{"replica-a", "replica-b"} {
		port := freePort(t)
		run(t, "strata", "serve", "--bucket", bucket, "--listen", fmt.Sprintf("127.0.0.1:%d", port),
			"--instance", name, "--flush-interval", "200ms", "--merge-interval", "300ms")
		backends = append(backends, fmt.Sprintf("http://127.0.0.1:%d", port))
		waitUp(t, backends[len(backends)-1]+"/healthz")
	}
	var turn, dropped atomic.Int64
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		req, _ := http.NewRequestWithContext(r.Context(), r.Method, backends[turn.Add(1)%2]+r.URL.RequestURI(), strings.NewReader(string(body)))
		req.Header = r.Header.Clone()
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		data, _ := io.ReadAll(resp.Body)
		if r.Method == "POST" && rand.IntN(20) == 0 {
			dropped.Add(1)
			conn, _, _ := w.(http.Hijacker).Hijack()
			conn.Close() // the answer is lost; the request was acted on
			return
		}
		for k, v := range resp.Header {
			w.Header()[k] = v
		}
		w.WriteHeader(resp.StatusCode)
		w.Write(data)
	}))
	defer proxy.Close()
	base := proxy.URL + "/api/v1/tables/t"
	// send retries a request on a new connection until it is answered:
	// the proxy sends each attempt to the other replica.
	send := func(method, path, key, body string) map[string]any {
		t.Helper()
		for range 50 {
			req, _ := http.NewRequest(method, base+path, strings.NewReader(body))
			req.Header.Set("Content-Type", "application/x-ndjson")
			if method == "PUT" {
				req.Header.Set("Content-Type", "application/json")
			}
			if key != "" {
				req.Header.Set("Idempotency-Key", key)
			}
			req.Close = true
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				continue
			}
			data, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode >= 500 {
				time.Sleep(50 * time.Millisecond)
				continue
			}
			if resp.StatusCode/100 != 2 {
				t.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, data)
			}
			var out map[string]any
			_ = json.Unmarshal(data, &out)
			return out
		}
		t.Fatalf("%s %s: no answer in 50 attempts", method, path)
		return nil
	}
	send("PUT", "", "", `{"fields":[{"name":"id","type":"int64"},{"name":"v","type":"int64"}]}`)
	var want []int64
	for i := range 200 {
		var rows strings.Builder
		for j := range 5 {
			id := int64(i*5 + j)
			want = append(want, id)
			fmt.Fprintf(&rows, "{\"id\":%d,\"v\":0}\n", id)
		}
		send("POST", "/rows", fmt.Sprintf("batch-%d", i), rows.String())
	}
	// Upserts: each key's first upsert is sent again after its second.
	const keys = 20
	for k := range keys {
		id := 100000 + k
		for _, v := range []int{1, 2, 1} {
			send("POST", "/rows?mode=upsert&key=id", fmt.Sprintf("up-%d-%d", k, v), fmt.Sprintf("{\"id\":%d,\"v\":%d}\n", id, v))
		}
	}
	checkpoint := func() {
		t.Helper()
		for _, b := range backends {
			c, err := client.New(b, nil)
			if err != nil {
				t.Fatal(err)
			}
			if err := c.CheckpointLSM(ctx, "t"); err != nil {
				t.Fatal(err)
			}
		}
	}
	// Upserts through the replicas' shards: each key's first upsert is
	// merged, then its second, then the first is sent again (reaching
	// either replica, the one that stored it or the other).
	const shardKeys = 20
	shardUpsert := func(k, v int) {
		send("POST", "/rows?mode=upsert&key=id&through=shard", fmt.Sprintf("sup-%d-%d", k, v), fmt.Sprintf("{\"id\":%d,\"v\":%d}\n", 200000+k, v))
	}
	for _, v := range []int{1, 2, 1} {
		for k := range shardKeys {
			shardUpsert(k, v)
		}
		checkpoint()
	}
	t.Logf("%d answers dropped", dropped.Load())
	checkpoint()
	tableURL := strings.Replace(bucket, "?", "/t?", 1)
	checkOnce(t, tableURL, want)
	resp, err := http.Get(backends[0] + "/api/v1/tables/t/rows?format=jsonl&filter=id%3E%3D100000%20AND%20id%3C200000")
	if err != nil {
		t.Fatal(err)
	}
	data, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	if len(lines) != keys {
		t.Fatalf("%d upserted rows, want %d: %s", len(lines), keys, data)
	}
	for _, l := range lines {
		if !strings.HasSuffix(l, `"v":2}`) {
			t.Fatalf("an upsert sent again undid a later one: %s", l)
		}
	}
	resp, err = http.Get(backends[1] + "/api/v1/tables/t/rows?format=jsonl&filter=id%3E%3D200000")
	if err != nil {
		t.Fatal(err)
	}
	data, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	lines = strings.Split(strings.TrimSpace(string(data)), "\n")
	if len(lines) != shardKeys {
		t.Fatalf("%d rows upserted through the shards, want %d: %s", len(lines), shardKeys, data)
	}
	for _, l := range lines {
		if !strings.HasSuffix(l, `"v":2}`) {
			t.Fatalf("an upsert through a shard sent again undid a later one: %s", l)
		}
	}
	if n := len(idsIn(t, tableURL)); n != len(want)+keys+shardKeys {
		t.Fatalf("the table holds %d ids, want %d", n, len(want)+keys+shardKeys)
	}
}
