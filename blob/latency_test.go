package blob_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/harness/testenv"
)

// BenchmarkPutIfAbsent measures conditional creates of fresh 4 KiB keys
// (the size of a small manifest) and reports their latency percentiles.
func BenchmarkPutIfAbsent(b *testing.B) {
	stores := map[string]func(b *testing.B) string{
		"file":  func(b *testing.B) string { return "file://" + b.TempDir() },
		"minio": func(b *testing.B) string { return testenv.MinIO(b).URL(b) },
	}
	for _, name := range []string{"file", "minio"} {
		b.Run(name, func(b *testing.B) {
			bk, err := blob.Open(context.Background(), stores[name](b))
			if err != nil {
				b.Fatal(err)
			}
			data := make([]byte, 4096)
			var lat []time.Duration
			i := 0
			for b.Loop() {
				i++
				t0 := time.Now()
				if err := bk.PutIfAbsent(context.Background(), fmt.Sprintf("_versions/%08d", i), data); err != nil {
					b.Fatal(err)
				}
				lat = append(lat, time.Since(t0))
			}
			slices.Sort(lat)
			p := func(q float64) float64 {
				return float64(lat[min(len(lat)-1, int(q*float64(len(lat))))].Microseconds()) / 1000
			}
			b.ReportMetric(p(0.50), "p50-ms")
			b.ReportMetric(p(0.99), "p99-ms")
		})
	}
}
