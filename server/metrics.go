package server

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/compactor"
	"github.com/stratadb/strata/walshard"
)

// metrics are exported in the Prometheus text format on GET /metrics.
type metrics struct {
	mu struct {
		sync.Mutex
		requests map[[2]string]int64 // route, status → count
		seconds  map[string]float64  // route → total seconds
		count    map[string]int64    // route → requests
	}
	rowsAppended atomic.Int64
	compactions  atomic.Int64
	fleetMerges  atomic.Int64 // fleet merge commits
	fleetGens    atomic.Int64 // generations they added
}

func newMetrics() *metrics {
	m := &metrics{}
	m.mu.requests = map[[2]string]int64{}
	m.mu.seconds = map[string]float64{}
	m.mu.count = map[string]int64{}
	return m
}

func (m *metrics) observe(route string, status int, d time.Duration) {
	if route == "" {
		route = "unmatched"
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.mu.requests[[2]string{route, fmt.Sprint(status)}]++
	m.mu.seconds[route] += d.Seconds()
	m.mu.count[route]++
}

func label(s string) string { return strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`).Replace(s) }

func (s *Server) serveMetrics(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain; version=0.0.4")
	m := s.metrics
	m.mu.Lock()
	var keys [][2]string
	for k := range m.mu.requests {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b [2]string) int { return strings.Compare(a[0]+a[1], b[0]+b[1]) })
	fmt.Fprintln(w, "# HELP strata_http_requests_total HTTP requests by route and status.")
	fmt.Fprintln(w, "# TYPE strata_http_requests_total counter")
	for _, k := range keys {
		fmt.Fprintf(w, "strata_http_requests_total{route=\"%s\",status=\"%s\"} %d\n", label(k[0]), k[1], m.mu.requests[k])
	}
	var routes []string
	for r := range m.mu.count {
		routes = append(routes, r)
	}
	sort.Strings(routes)
	fmt.Fprintln(w, "# HELP strata_http_request_seconds Time spent serving requests, by route.")
	fmt.Fprintln(w, "# TYPE strata_http_request_seconds summary")
	for _, r := range routes {
		fmt.Fprintf(w, "strata_http_request_seconds_sum{route=\"%s\"} %g\n", label(r), m.mu.seconds[r])
		fmt.Fprintf(w, "strata_http_request_seconds_count{route=\"%s\"} %d\n", label(r), m.mu.count[r])
	}
	m.mu.Unlock()
	fmt.Fprintln(w, "# HELP strata_rows_appended_total Rows acknowledged through this server.")
	fmt.Fprintln(w, "# TYPE strata_rows_appended_total counter")
	fmt.Fprintf(w, "strata_rows_appended_total %d\n", m.rowsAppended.Load())
	fmt.Fprintln(w, "# HELP strata_compaction_runs_total Compactions run by this server.")
	fmt.Fprintln(w, "# TYPE strata_compaction_runs_total counter")
	fmt.Fprintf(w, "strata_compaction_runs_total %d\n", m.compactions.Load())
	fmt.Fprintln(w, "# HELP strata_fleet_merges_total Fleet merge commits of this server (every shard's generations in one).")
	fmt.Fprintln(w, "# TYPE strata_fleet_merges_total counter")
	fmt.Fprintf(w, "strata_fleet_merges_total %d\n", m.fleetMerges.Load())
	fmt.Fprintln(w, "# HELP strata_fleet_merged_generations_total Generations those commits added.")
	fmt.Fprintln(w, "# TYPE strata_fleet_merged_generations_total counter")
	fmt.Fprintf(w, "strata_fleet_merged_generations_total %d\n", m.fleetGens.Load())

	s.mu.Lock()
	tables := make([]*tableState, 0, len(s.mu.tables))
	for _, t := range s.mu.tables {
		tables = append(tables, t)
	}
	s.mu.Unlock()
	slices.SortFunc(tables, func(a, b *tableState) int { return strings.Compare(a.name, b.name) })
	fmt.Fprintln(w, "# HELP strata_object_store_requests_total Object-store requests by table and kind.")
	fmt.Fprintln(w, "# TYPE strata_object_store_requests_total counter")
	for _, t := range tables {
		st, _ := blob.StatsOf(t.b)
		for _, kv := range []struct {
			kind string
			n    int64
		}{{"get", st.Gets}, {"range_get", st.RangeGets}, {"put", st.Puts}, {"conditional_put_won", st.CondPutsWon},
			{"conditional_put_lost", st.CondPutsLost}, {"conditional_put_error", st.CondPutsErr}, {"list", st.Lists},
			{"delete", st.Deletes}, {"head", st.Heads}} {
			fmt.Fprintf(w, "strata_object_store_requests_total{table=\"%s\",kind=\"%s\"} %d\n", label(t.name), kv.kind, kv.n)
		}
	}
	fmt.Fprintln(w, "# HELP strata_shards_adopted_total Abandoned shards the compactor Job adopted, from the table's run history (read at most once a minute).")
	fmt.Fprintln(w, "# TYPE strata_shards_adopted_total counter")
	for _, t := range tables {
		if n, ok := t.adopted(r.Context()); ok {
			fmt.Fprintf(w, "strata_shards_adopted_total{table=\"%s\"} %d\n", label(t.name), n)
		}
	}
	var shards []walshard.Stats
	var names []string
	for _, t := range tables {
		if sh := t.openShard(); sh != nil {
			shards = append(shards, sh.Stats())
			names = append(names, t.name)
		}
	}
	family := func(name, typ, help string, value func(walshard.Stats) int64) {
		fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, typ)
		for i, st := range shards {
			fmt.Fprintf(w, "%s{table=\"%s\",shard=\"%s\"} %d\n", name, label(names[i]), st.Shard, value(st))
		}
	}
	family("strata_wal_lag_entries", "gauge", "WAL entries of this server's shard not yet in a generation.",
		func(s walshard.Stats) int64 { return int64(s.WALLag) })
	family("strata_generations_pending", "gauge", "Generations of this server's shard awaiting merge.",
		func(s walshard.Stats) int64 { return int64(s.PendingGenerations) })
	family("strata_commits_total", "counter", "Merge commits of this server's shard.",
		func(s walshard.Stats) int64 { return s.Merges })
	family("strata_commit_conflicts_total", "counter", "Times those commits caught up with other commits first.",
		func(s walshard.Stats) int64 { return s.MergeRebases })
}

// adopted is the Job's count of adopted shards, read from the table's run
// history at most once a minute; false when it has never been read.
func (t *tableState) adopted(ctx context.Context) (int64, bool) {
	t.job.Lock()
	defer t.job.Unlock()
	if time.Since(t.job.readAt) >= time.Minute {
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		if st, err := compactor.ReadStatus(ctx, t.b, 1); err == nil {
			t.job.adopted, t.job.ok, t.job.readAt = st.TotalAdopted, true, time.Now()
		}
	}
	return t.job.adopted, t.job.ok
}
