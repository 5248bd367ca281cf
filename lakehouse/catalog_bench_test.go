package lakehouse_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/commit"
	icebergexport "github.com/stratadb/strata/engine/iceberg"
	"github.com/stratadb/strata/harness/rollouts"
	"github.com/stratadb/strata/server"
	"github.com/stratadb/strata/table/format"
	"github.com/stratadb/strata/table/fragment"
)

// BenchmarkCatalogLoad measures a load of a table through the Iceberg
// catalog (GET …/tables/t), on a local folder, for 10 versions, 10,000
// versions (a fragment each), and 100,000 fragments (ten versions of
// 10,000 fragments each): cold, the first load,
// which writes the view's metadata for every version garbage collection
// keeps (all of them: they are younger than an hour); and warm, the loads
// after it, answered from what the server holds. It reports each one's
// seconds and requests to the store, and the heap the cold load grew to.
//
//	go test -run '^$' -bench CatalogLoad -benchtime 20x -timeout 0 ./lakehouse
func BenchmarkCatalogLoad(b *testing.B) {
	for _, c := range []struct {
		name                string
		versions, fragments int // fragments each version adds
	}{{"versions=10", 10, 1}, {"versions=10000", 10_000, 1}, {"fragments=100000", 11, 10_000}} {
		b.Run(c.name, func(b *testing.B) {
			root := "file://" + b.TempDir()
			tb, err := blob.Open(ctx, blob.JoinURL(root, "t"))
			if err != nil {
				b.Fatal(err)
			}
			defer tb.Close()
			buildHistory(b, tb, c.versions, c.fragments)
			var served atomic.Pointer[blob.Bucket]
			srv, err := server.New(&server.Options{Bucket: root, Instance: "bench", IcebergExport: icebergexport.ForCatalog,
				Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
				Open: func(ctx context.Context, u string) (blob.Bucket, error) {
					bk, err := blob.Open(ctx, u)
					if err == nil && u == blob.JoinURL(root, "t") {
						served.Store(&bk)
					}
					return bk, err
				}})
			if err != nil {
				b.Fatal(err)
			}
			hs := httptest.NewServer(srv.Handler())
			defer hs.Close()
			defer srv.Shutdown(ctx)
			load := func() {
				resp, err := http.Get(hs.URL + "/iceberg/v1/namespaces/default/tables/t")
				if err != nil {
					b.Fatal(err)
				}
				n, _ := io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK || n == 0 {
					b.Fatalf("load: %d", resp.StatusCode)
				}
			}
			requests := func() int64 {
				p := served.Load()
				if p == nil {
					return 0
				}
				st, _ := blob.StatsOf(*p)
				return st.Requests()
			}
			peak := heapPeak()
			start := time.Now()
			load()
			cold, coldReqs, coldHeap := time.Since(start), requests(), peak()
			before := requests()
			n := 0
			for b.Loop() {
				load()
				n++
			}
			// After the loop: b.Loop's first call resets the metrics.
			b.ReportMetric(cold.Seconds(), "cold-s")
			b.ReportMetric(float64(coldReqs), "cold-requests")
			b.ReportMetric(float64(coldHeap)/(1<<20), "cold-heap-MiB")
			b.ReportMetric(float64(requests()-before)/float64(n), "warm-requests/op")
		})
	}
}

// buildHistory commits versions appends of fragments one-row fragments
// each, after the create.
func buildHistory(b *testing.B, bk blob.Bucket, versions, fragments int) {
	b.Helper()
	alloc := memory.NewGoAllocator()
	if _, err := commit.Create(ctx, bk, rollouts.Schema, nil, nil); err != nil {
		b.Fatal(err)
	}
	t, err := commit.OpenTable(ctx, bk, nil)
	if err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	for v := 1; v < versions; v++ {
		frags := make([]format.Fragment, fragments)
		var wg sync.WaitGroup
		errs := make([]error, fragments)
		slots := make(chan struct{}, 16)
		for i := range fragments {
			slots <- struct{}{}
			wg.Go(func() {
				defer func() { <-slots }()
				rec := rollouts.Batch(alloc, 42, i, int64(v), 1)
				defer rec.Release()
				frags[i], errs[i] = writeFragment(bk, rec)
			})
		}
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				b.Fatal(err)
			}
		}
		if _, err := t.Commit(ctx, format.Transaction{Kind: format.KindAppend, CommitID: format.NewID(), Added: frags}); err != nil {
			b.Fatal(err)
		}
	}
	b.Logf("built %d versions of %d fragments each in %v", versions, fragments, time.Since(start).Round(time.Millisecond))
}

func writeFragment(bk blob.Bucket, rec arrow.RecordBatch) (format.Fragment, error) {
	w, err := fragment.NewWriter(ctx, bk, rec.Schema())
	if err != nil {
		return format.Fragment{}, err
	}
	if err := w.Write(rec); err != nil {
		w.Abort()
		return format.Fragment{}, err
	}
	return w.Close()
}

// heapPeak samples the heap in use every 10 ms until the function it
// returns is called, which returns the largest sample.
func heapPeak() func() uint64 {
	var peak atomic.Uint64
	done := make(chan struct{})
	sample := func() {
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		if m.HeapInuse > peak.Load() {
			peak.Store(m.HeapInuse)
		}
	}
	go func() {
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				sample()
			}
		}
	}()
	return func() uint64 {
		close(done)
		sample()
		return peak.Load()
	}
}
