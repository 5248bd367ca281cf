package server_test

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stratadb/strata/harness/testenv"
	"github.com/stratadb/strata/server"
)

// BenchmarkAppendLoad drives POST …/rows with 16 concurrent clients on
// loopback (JSON lines of 10 small rows each, acknowledged once durable in
// the server's WAL shard) and reports requests/s and latency percentiles,
// on a local folder and on MinIO.
//
//	go test -run '^$' -bench AppendLoad -benchtime 4000x ./server
func BenchmarkAppendLoad(b *testing.B) {
	stores := map[string]func() string{
		"file":  func() string { return "file://" + b.TempDir() },
		"minio": func() string { return testenv.MinIO(b).URL(b) },
	}
	for _, store := range []string{"file", "minio"} {
		b.Run(store, func(b *testing.B) {
			f := start(b, stores[store](), server.Options{})
			code, body := raw(b, f, "PUT", "/api/v1/tables/load", "application/json",
				`{"fields":[{"name":"id","type":"int64"},{"name":"msg","type":"string"}]}`, "")
			if code != http.StatusCreated {
				b.Fatalf("create: %d %s", code, body)
			}
			var rows strings.Builder
			for i := range 10 {
				fmt.Fprintf(&rows, "{\"id\":%d,\"msg\":\"rollout step %d\"}\n", i, i)
			}
			payload := rows.String()
			const clients = 16
			work := make(chan struct{}, b.N)
			for range b.N {
				work <- struct{}{}
			}
			close(work)
			var mu sync.Mutex
			var lat []time.Duration
			b.ResetTimer()
			start := time.Now()
			var wg sync.WaitGroup
			for range clients {
				wg.Go(func() {
					for range work {
						t0 := time.Now()
						resp, err := http.Post(f.http.URL+"/api/v1/tables/load/rows", "application/x-ndjson", strings.NewReader(payload))
						if err != nil || resp.StatusCode != http.StatusOK {
							b.Errorf("append: %v %v", err, resp)
							return
						}
						resp.Body.Close()
						d := time.Since(t0)
						mu.Lock()
						lat = append(lat, d)
						mu.Unlock()
					}
				})
			}
			wg.Wait()
			wall := time.Since(start)
			slices.Sort(lat)
			b.ReportMetric(float64(len(lat))/wall.Seconds(), "req/s")
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
			b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
		})
	}
}
