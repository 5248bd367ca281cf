package server

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/engine"
	"github.com/stratadb/strata/internal/telemetry"
	"github.com/stratadb/strata/table"
)

// metrics are the server's Prometheus families, on a registry of its own
// (GET /metrics): the Go runtime and process, the build, HTTP requests,
// appends, compactions, fleet merges and object-store requests as
// histograms, and per table (only for tables this server has open) the
// object-store request counts, the shard's lag, the Job's adoptions and
// the named consumers' lag.
type metrics struct {
	reg               *prometheus.Registry
	requests          *prometheus.CounterVec
	requestSeconds    *prometheus.HistogramVec
	rowsAppended      prometheus.Counter
	appendSeconds     prometheus.Histogram
	ownWrites         *prometheus.CounterVec
	compactions       *prometheus.CounterVec
	compactionSeconds prometheus.Histogram
	fleetMerges       prometheus.Counter
	fleetGens         prometheus.Counter
	fleetMergeSeconds prometheus.Histogram
	storeSeconds      *prometheus.HistogramVec
	commitSeconds     prometheus.Histogram
	failures          *prometheus.CounterVec
	stallSeconds      *prometheus.CounterVec
	quarantined       prometheus.Counter
}

func newMetrics(s *Server) *metrics {
	m := &metrics{reg: telemetry.NewRegistry()}
	f := func(c prometheus.Collector) { m.reg.MustRegister(c) }
	m.storeSeconds = telemetry.StoreRequests(m.reg, "every table")
	m.requests = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "strata_http_requests_total",
		Help: "HTTP requests by route and status code."}, []string{"route", "code"})
	m.requestSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "strata_http_request_duration_seconds",
		Help: "Time to serve a request, by route.", Buckets: telemetry.LatencyBuckets}, []string{"route"})
	m.rowsAppended = prometheus.NewCounter(prometheus.CounterOpts{Name: "strata_rows_appended_total",
		Help: "Rows acknowledged through this server."})
	m.appendSeconds = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "strata_append_duration_seconds",
		Help: "Time from a decoded append to its rows being durable in the WAL.", Buckets: telemetry.LatencyBuckets})
	m.ownWrites = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "strata_own_write_reads_total",
		Help: "Reads that named the client's own writes (written=), by how they were served: merged (a plain read), own_shard (with this server's shard's unmerged rows), fleet (a fresh read of every shard)."}, []string{"how"})
	m.compactions = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "strata_compactions_total",
		Help: "Compactions run by this server, by outcome (committed, nothing, failed)."}, []string{"outcome"})
	m.compactionSeconds = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "strata_compaction_duration_seconds",
		Help: "Time of the compactions run by this server.", Buckets: telemetry.LatencyBuckets})
	m.fleetMerges = prometheus.NewCounter(prometheus.CounterOpts{Name: "strata_fleet_merges_total",
		Help: "Fleet merge commits of this server (every shard's generations in one)."})
	m.fleetGens = prometheus.NewCounter(prometheus.CounterOpts{Name: "strata_fleet_merged_generations_total",
		Help: "Generations those commits added."})
	m.fleetMergeSeconds = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "strata_fleet_merge_duration_seconds",
		Help: "Time of the fleet merges run by this server.", Buckets: telemetry.LatencyBuckets})
	m.commitSeconds = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "strata_commit_duration_seconds",
		Help: "Time of this server's own shard merge commits, catching up with other commits included (failures too).", Buckets: telemetry.LatencyBuckets})
	m.failures = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "strata_background_failures_total",
		Help: "Failures of this server's background work, by what failed: flush, merge, compaction, commit (a merge commit of its shard), background (anything else: a keep-alive, a history read)."}, []string{"what"})
	m.stallSeconds = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "strata_write_stall_seconds_total",
		Help: "Time writers of this server's shard waited for room, by reason: memtable (an append, for the memtable to flush), generations (a flush, for merges)."}, []string{"reason"})
	m.quarantined = prometheus.NewCounter(prometheus.CounterOpts{Name: "strata_wal_entries_quarantined_total",
		Help: "WAL entries of this server's shard set aside at replay (their rows are not in the table; see strata repair)."})
	for _, c := range []prometheus.Collector{m.failures, m.stallSeconds, m.quarantined, m.commitSeconds, m.requests, m.requestSeconds, m.rowsAppended, m.appendSeconds, m.ownWrites, m.compactions,
		m.compactionSeconds, m.fleetMerges, m.fleetGens, m.fleetMergeSeconds} {
		f(c)
	}
	f(&tableCollector{s: s})
	return m
}

func (m *metrics) observe(route string, status int, d time.Duration) {
	if route == "" {
		route = "unmatched"
	}
	m.requests.WithLabelValues(route, strconv.Itoa(status)).Inc()
	m.requestSeconds.WithLabelValues(route).Observe(d.Seconds())
}

// observeStore times a table's object-store requests.
func (m *metrics) observeStore(b blob.Bucket) { telemetry.ObserveStore(b, m.storeSeconds) }

func (s *Server) serveMetrics(w http.ResponseWriter, r *http.Request) {
	promhttp.HandlerFor(s.metrics.reg, promhttp.HandlerOpts{ErrorLog: nil}).ServeHTTP(w, r)
}

// tableCollector reads the per-table families at scrape time, for the
// tables this server has open: a dropped table, or one never created, has
// none.
type tableCollector struct{ s *Server }

var (
	descStoreRequests = prometheus.NewDesc("strata_object_store_requests_total", "Object-store requests by table and kind.", []string{"table", "kind"}, nil)
	descWALLag        = prometheus.NewDesc("strata_wal_lag_entries", "WAL entries of this server's shard not yet in a generation.", []string{"table", "shard"}, nil)
	descPending       = prometheus.NewDesc("strata_generations_pending", "Generations of this server's shard awaiting merge.", []string{"table", "shard"}, nil)
	descCommits       = prometheus.NewDesc("strata_commits_total", "Merge commits of this server's shard.", []string{"table", "shard"}, nil)
	descConflicts     = prometheus.NewDesc("strata_commit_conflicts_total", "Times those commits caught up with other commits first.", []string{"table", "shard"}, nil)
	descAdopted       = prometheus.NewDesc("strata_shards_adopted_total", "Abandoned shards the compactor Job adopted, from the table's run history (read at most once a minute).", []string{"table"}, nil)
	descRunFailed     = prometheus.NewDesc("strata_job_run_failed", "1 when the newest recorded run of the kind (compaction, merge, adoption, export, gc) failed, 0 once one succeeds, from the table's run history (read at most once a minute).", []string{"table", "kind"}, nil)
	descRunSeconds    = prometheus.NewDesc("strata_job_run_duration_seconds", "Duration of the newest recorded run of the kind, from the table's run history (read at most once a minute).", []string{"table", "kind"}, nil)
	descConsumerLag   = prometheus.NewDesc("strata_consumer_lag_versions", "Versions past a named consumer's position (read at most once a minute).", []string{"table", "consumer"}, nil)
	descConsumerAge   = prometheus.NewDesc("strata_consumer_position_age_seconds", "Time since a named consumer last recorded its position (read at most once a minute).", []string{"table", "consumer"}, nil)
)

// consumerLag is a named consumer's position as the background read found
// it.
type consumerLag struct {
	name    string
	lag     uint64
	updated time.Time
}

func (c *tableCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descStoreRequests, descWALLag, descPending, descCommits, descConflicts, descAdopted, descRunFailed, descRunSeconds, descConsumerLag, descConsumerAge} {
		ch <- d
	}
}

func (c *tableCollector) Collect(ch chan<- prometheus.Metric) {
	c.s.mu.Lock()
	tables := make([]*tableState, 0, len(c.s.mu.tables))
	for _, t := range c.s.mu.tables {
		tables = append(tables, t)
	}
	c.s.mu.Unlock()
	for _, t := range tables {
		st, _ := blob.StatsOf(t.b)
		for _, kv := range []struct {
			kind string
			n    int64
		}{{"get", st.Gets}, {"range_get", st.RangeGets}, {"put", st.Puts}, {"conditional_put_won", st.CondPutsWon},
			{"conditional_put_lost", st.CondPutsLost}, {"conditional_put_error", st.CondPutsErr}, {"list", st.Lists},
			{"delete", st.Deletes}, {"head", st.Heads}} {
			ch <- prometheus.MustNewConstMetric(descStoreRequests, prometheus.CounterValue, float64(kv.n), t.label, kv.kind)
		}
		if sh := t.db.OpenShard(); sh != nil {
			ss := sh.Stats()
			ch <- prometheus.MustNewConstMetric(descWALLag, prometheus.GaugeValue, float64(ss.WALLag), t.label, ss.Shard)
			ch <- prometheus.MustNewConstMetric(descPending, prometheus.GaugeValue, float64(ss.PendingGenerations), t.label, ss.Shard)
			ch <- prometheus.MustNewConstMetric(descCommits, prometheus.CounterValue, float64(ss.Merges), t.label, ss.Shard)
			ch <- prometheus.MustNewConstMetric(descConflicts, prometheus.CounterValue, float64(ss.MergeRebases), t.label, ss.Shard)
		}
		n, kinds, consumers, ok := t.jobState()
		if ok {
			ch <- prometheus.MustNewConstMetric(descAdopted, prometheus.CounterValue, float64(n), t.label)
		}
		for k, ks := range kinds {
			failed := 0.0
			if ks.LastError != "" {
				failed = 1
			}
			ch <- prometheus.MustNewConstMetric(descRunFailed, prometheus.GaugeValue, failed, t.label, k)
			ch <- prometheus.MustNewConstMetric(descRunSeconds, prometheus.GaugeValue, ks.DurationS, t.label, k)
		}
		for _, c := range consumers {
			ch <- prometheus.MustNewConstMetric(descConsumerLag, prometheus.GaugeValue, float64(c.lag), t.label, c.name)
			ch <- prometheus.MustNewConstMetric(descConsumerAge, prometheus.GaugeValue, time.Since(c.updated).Seconds(), t.label, c.name)
		}
	}
}

// jobState is the Job's count of adopted shards as last read from the
// table's run history (false when it has never been read) and the named
// consumers' lag as last read; when that read is older than a minute, the
// table's handle reads them again in the background: a scrape makes no
// request to the store, and shows the new figures at the next scrape.
func (t *tableState) jobState() (int64, map[string]engine.KindStatus, []consumerLag, bool) {
	t.job.Lock()
	defer t.job.Unlock()
	if !t.job.reading && time.Since(t.job.readAt) >= time.Minute {
		t.job.reading = true
		t.db.Go("reading the compactor's history and the consumers", t.readJob)
	}
	return t.job.adopted, t.job.kinds, t.job.consumers, t.job.ok
}

// readJob reads the Job's count of adopted shards from the table's run
// history, and the named consumers' positions.
func (t *tableState) readJob(ctx context.Context) error {
	defer func() {
		t.job.Lock()
		t.job.reading, t.job.readAt = false, time.Now()
		t.job.Unlock()
	}()
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	st, jobErr := t.db.History(ctx, 1)
	if jobErr == nil {
		t.job.Lock()
		t.job.adopted, t.job.kinds, t.job.ok = st.TotalAdopted, st.Kinds, true
		t.job.Unlock()
	}
	lags, err := readLags(ctx, t.b)
	if err == nil {
		t.job.Lock()
		t.job.consumers = lags
		t.job.Unlock()
	}
	return errors.Join(jobErr, err)
}

// readLags reads every named consumer's position and how many versions it
// is behind the latest.
func readLags(ctx context.Context, b blob.Bucket) ([]consumerLag, error) {
	cs, err := table.Consumers(ctx, b)
	if err != nil || len(cs) == 0 {
		return nil, err
	}
	latest, err := table.LatestVersion(ctx, b)
	if err != nil {
		return nil, err
	}
	lags := make([]consumerLag, len(cs))
	for i, c := range cs {
		lags[i] = consumerLag{name: c.Name, lag: latest - min(c.Version, latest), updated: c.Updated}
	}
	return lags, nil
}

// listener is the metrics' subscription to the tables' engine events.
func (m *metrics) listener() engine.EventListener {
	failed := func(what string, err error) {
		if err != nil {
			m.failures.WithLabelValues(what).Inc()
		}
	}
	return engine.EventListener{
		FlushEnd: func(i engine.FlushInfo) { failed("flush", i.Err) },
		BackgroundError: func(i engine.BackgroundErrorInfo) {
			switch i.What {
			case "flush", "merge", "compaction": // counted by their own events
			default:
				failed("background", i.Err)
			}
		},
		CommitEnd: func(i engine.CommitInfo) {
			m.commitSeconds.Observe(i.Duration.Seconds())
			failed("commit", i.Err)
		},
		Quarantine: func(engine.QuarantineInfo) { m.quarantined.Inc() },
		WriteStall: func(i engine.WriteStallInfo) {
			reason := "memtable"
			if i.Reason == engine.StallGenerations {
				reason = "generations"
			}
			m.stallSeconds.WithLabelValues(reason).Add(i.Duration.Seconds())
		},
		CompactionEnd: func(i engine.CompactionInfo) {
			failed("compaction", i.Err)
			outcome := "committed"
			switch {
			case i.Err != nil:
				outcome = "failed"
			case i.Result.Version == 0:
				outcome = "nothing"
			}
			m.compactions.WithLabelValues(outcome).Inc()
			m.compactionSeconds.Observe(i.Duration.Seconds())
		},
		MergeEnd: func(i engine.MergeInfo) {
			failed("merge", i.Err)
			if i.Fleet {
				m.fleetMergeSeconds.Observe(i.Duration.Seconds())
				if i.Result.Version != 0 {
					m.fleetMerges.Inc()
					m.fleetGens.Add(float64(i.Result.Generations))
				}
			}
		},
	}
}
