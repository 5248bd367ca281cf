// Package telemetry holds what the server's and the compactor Job's
// Prometheus metrics share: a registry with the Go runtime, the process and
// the build, the latency buckets, and the histogram of object-store
// requests.
package telemetry

import (
	"net/url"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/internal/buildinfo"
)

// LatencyBuckets: 1 ms to about 2 minutes.
var LatencyBuckets = prometheus.ExponentialBuckets(0.001, 2.5, 14)

// NewRegistry returns a registry holding go_*, process_* and
// strata_build_info{version,revision,goversion}.
func NewRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	bi := buildinfo.Get()
	build := prometheus.NewGauge(prometheus.GaugeOpts{Name: "strata_build_info", Help: "The build: version, revision and Go version (always 1).",
		ConstLabels: prometheus.Labels{"version": bi.Version, "revision": bi.Revision, "goversion": bi.Go}})
	build.Set(1)
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), build)
	return reg
}

// StoreRequests is strata_object_store_request_duration_seconds{op,outcome},
// registered on reg.
func StoreRequests(reg prometheus.Registerer, who string) *prometheus.HistogramVec {
	h := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "strata_object_store_request_duration_seconds",
		Help: "Object-store requests of " + who + ", by operation and outcome (ok, not_found, exists, error).", Buckets: LatencyBuckets},
		[]string{"op", "outcome"})
	reg.MustRegister(h)
	return h
}

// ObserveStore times b's requests into h (see blob.Observe).
func ObserveStore(b blob.Bucket, h *prometheus.HistogramVec) {
	blob.Observe(b, func(op, outcome string, d time.Duration) {
		h.WithLabelValues(op, outcome).Observe(d.Seconds())
	})
}

// TableLabel is the `table` label of a table's series, the same in every
// process that serves it: its path under the bucket (or, for a local
// folder, under the root), without scheme, bucket, or query
// ("s3://lake/runs/eval?endpoint=…" is "runs/eval"; the server's table
// "eval" under "s3://lake/runs" too), so that the server's series and the
// Job's join. A URL with no path is labelled by its host (a bucket's
// root), one that does not parse by itself.
func TableLabel(tableURL string) string {
	u, err := url.Parse(tableURL)
	if err != nil {
		return tableURL
	}
	if p := strings.Trim(u.Path, "/"); p != "" {
		return p
	}
	if u.Host != "" {
		return u.Host
	}
	return tableURL
}
