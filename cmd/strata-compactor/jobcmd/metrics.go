package jobcmd

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/engine"
	"github.com/stratadb/strata/internal/telemetry"
	"github.com/stratadb/strata/job"
)

// jobMetrics are the Job's Prometheus families, served on
// --metrics-listen in interval mode.
type jobMetrics struct {
	reg          *prometheus.Registry
	passes       prometheus.Counter
	passSeconds  prometheus.Histogram
	tables       *prometheus.CounterVec
	fragments    *prometheus.GaugeVec
	fleetMerges  *prometheus.CounterVec
	fleetGens    *prometheus.CounterVec
	fleetSeconds prometheus.Histogram
	adopted      *prometheus.CounterVec
	gcDeleted    *prometheus.CounterVec
	storeSeconds *prometheus.HistogramVec
	walLag       *prometheus.GaugeVec
	pending      *prometheus.GaugeVec
}

func newJobMetrics() *jobMetrics {
	m := &jobMetrics{reg: telemetry.NewRegistry()}
	m.storeSeconds = telemetry.StoreRequests(m.reg, "the Job")
	m.passes = prometheus.NewCounter(prometheus.CounterOpts{Name: "strata_compactor_passes_total", Help: "Passes of the Job over its tables."})
	m.passSeconds = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "strata_compactor_pass_duration_seconds",
		Help: "Time of a pass over every table.", Buckets: telemetry.LatencyBuckets})
	m.tables = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "strata_compactor_tables_total",
		Help: "Table outcomes of the passes: compacted, skipped (not due, lease held, idle) or failed."}, []string{"table", "outcome"})
	m.fragments = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "strata_compactor_table_fragments",
		Help: "Fragments of the table after the Job's last pass over it."}, []string{"table"})
	m.fleetMerges = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "strata_compactor_fleet_merges_total",
		Help: "Fleet merges of the Job that committed or failed, by outcome."}, []string{"table", "outcome"})
	m.fleetGens = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "strata_compactor_fleet_merged_generations_total",
		Help: "Generations the Job's fleet merges added."}, []string{"table"})
	m.fleetSeconds = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "strata_compactor_fleet_merge_duration_seconds",
		Help: "Time of the Job's fleet merges.", Buckets: telemetry.LatencyBuckets})
	m.adopted = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "strata_compactor_shards_adopted_total",
		Help: "Abandoned shards the Job adopted."}, []string{"table"})
	m.gcDeleted = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "strata_compactor_gc_objects_deleted_total",
		Help: "Objects garbage collection deleted."}, []string{"table"})
	// The names and labels of the server's own shard's series: the lag
	// alerts take the max by table and shard over both.
	m.walLag = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "strata_wal_lag_entries",
		Help: "WAL entries of each shard not yet in a generation, as the Job's last reading of the shards found them."}, []string{"table", "shard"})
	m.pending = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "strata_generations_pending",
		Help: "Generations of each shard awaiting merge, as the Job's last reading of the shards found them."}, []string{"table", "shard"})
	m.reg.MustRegister(m.walLag, m.pending)
	m.reg.MustRegister(m.passes, m.passSeconds, m.tables, m.fragments, m.fleetMerges, m.fleetGens, m.fleetSeconds, m.adopted, m.gcDeleted)
	return m
}

// wire hangs the metrics on the Job's options.
func (m *jobMetrics) wire(o *job.Options) {
	open := o.Open
	if open == nil {
		open = blob.Open
	}
	o.Open = func(ctx context.Context, u string) (blob.Bucket, error) {
		b, err := open(ctx, u)
		if err == nil {
			telemetry.ObserveStore(b, m.storeSeconds)
		}
		return b, err
	}
	o.OnPass = func(sum job.Summary, d time.Duration) {
		m.passes.Inc()
		m.passSeconds.Observe(d.Seconds())
		for _, out := range sum.Outcomes {
			// The table's path under the bucket, as the server's series
			// name it (never the URL, whose query holds the endpoint).
			out.Table = telemetry.TableLabel(out.Table)
			outcome := "skipped"
			switch {
			case out.Err != nil:
				outcome = "failed"
			case out.Compacted:
				outcome = "compacted"
			}
			m.tables.WithLabelValues(out.Table, outcome).Inc()
			if !out.Idle && out.Err == nil {
				m.fragments.WithLabelValues(out.Table).Set(float64(out.FragmentsAfter))
			}
			// Every table's fleet-merge series exist from its first
			// pass, at 0 until a merge: a panel shows none rather than
			// no data, and rate() counts the first merge.
			for _, outcome := range []string{"committed", "failed"} {
				m.fleetMerges.WithLabelValues(out.Table, outcome)
			}
			m.fleetGens.WithLabelValues(out.Table)
			m.adopted.WithLabelValues(out.Table).Add(float64(len(out.Adopted)))
			m.gcDeleted.WithLabelValues(out.Table).Add(float64(out.ObjectsDeleted))
			m.setLags(out.Table, out.Lags)
		}
	}
	o.Listener = engine.Tee(engine.LoggingListener(o.Log), engine.EventListener{MergeEnd: func(i engine.MergeInfo) {
		m.fleetSeconds.Observe(i.Duration.Seconds())
		outcome := "committed"
		if i.Err != nil {
			outcome = "failed"
		}
		table := telemetry.TableLabel(i.Table)
		m.fleetMerges.WithLabelValues(table, outcome).Inc()
		m.fleetGens.WithLabelValues(table).Add(float64(i.Result.Generations))
	}})
}

// setLags replaces a table's per-shard lag series with a new reading (a
// shard retired since has none); nil: not read this pass.
func (m *jobMetrics) setLags(table string, lags []engine.ShardLag) {
	if lags == nil {
		return
	}
	m.walLag.DeletePartialMatch(prometheus.Labels{"table": table})
	m.pending.DeletePartialMatch(prometheus.Labels{"table": table})
	for _, l := range lags {
		m.walLag.WithLabelValues(table, l.Shard).Set(float64(l.WALLag))
		if l.Pending >= 0 {
			m.pending.WithLabelValues(table, l.Shard).Set(float64(l.Pending))
		}
	}
}

// serve serves /metrics, and /healthz for probes, on addr until ctx ends.
func (m *jobMetrics) serve(ctx context.Context, addr string, log *slog.Logger) (func(), error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{}))
	// A probe's: the process serves (a pass stuck on the store shows in
	// the pass metrics and alerts, not here).
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	log.Info("metrics listening", "listen", ln.Addr().String())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("metrics server failed", "error", err.Error())
		}
	}()
	return func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
		<-done
	}, nil
}
