package server_test

import (
	"errors"
	"log/slog"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/stratadb/strata/blob/fault"
	"github.com/stratadb/strata/harness/rollouts"
	"github.com/stratadb/strata/harness/testenv"
	"github.com/stratadb/strata/server"
)

// scrape parses GET /metrics as Prometheus does.
func scrape(t *testing.T, f *fixture) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get(f.http.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("/metrics does not parse: %v", err)
	}
	return fams
}

// hasTable tells whether any series of the family names the table.
func hasTable(fam *dto.MetricFamily, name string) bool {
	if fam == nil {
		return false
	}
	for _, m := range fam.Metric {
		for _, l := range m.Label {
			// The label is the table's path under the bucket: under a
			// folder, the folder's path and the table's name.
			if v := l.GetValue(); l.GetName() == "table" && (v == name || strings.HasSuffix(v, "/"+name)) {
				return true
			}
		}
	}
	return false
}

// /metrics parses as Prometheus text with the runtime, process and build
// families, latency histograms with observations, and series only for
// tables that exist.
func TestMetricsFamilies(t *testing.T) {
	f := start(t, "file://"+t.TempDir(), server.Options{})
	if _, err := f.c.CreateTable(ctx, "t", rollouts.Schema); err != nil {
		t.Fatal(err)
	}
	rec := rollouts.Batch(testenv.Allocator(t), 42, 0, 0, 10)
	defer rec.Release()
	if _, err := f.c.Append(ctx, "t", rec); err != nil {
		t.Fatal(err)
	}
	// A create that fails leaves nothing behind.
	if code, body := raw(t, f, "PUT", "/api/v1/tables/broken", "application/json", `{"fields":[]}`, ""); code != http.StatusBadRequest {
		t.Fatalf("create with no fields: %d %s", code, body)
	}
	if err := f.c.CheckpointLSM(ctx, "t"); err != nil {
		t.Fatal(err)
	}
	fams := scrape(t, f)
	want := map[string]dto.MetricType{
		"go_goroutines":                                dto.MetricType_GAUGE,
		"process_cpu_seconds_total":                    dto.MetricType_COUNTER,
		"strata_build_info":                            dto.MetricType_GAUGE,
		"strata_http_requests_total":                   dto.MetricType_COUNTER,
		"strata_http_request_duration_seconds":         dto.MetricType_HISTOGRAM,
		"strata_append_duration_seconds":               dto.MetricType_HISTOGRAM,
		"strata_compaction_duration_seconds":           dto.MetricType_HISTOGRAM,
		"strata_fleet_merge_duration_seconds":          dto.MetricType_HISTOGRAM,
		"strata_object_store_request_duration_seconds": dto.MetricType_HISTOGRAM,
		"strata_rows_appended_total":                   dto.MetricType_COUNTER,
		"strata_object_store_requests_total":           dto.MetricType_COUNTER,
		"strata_wal_lag_entries":                       dto.MetricType_GAUGE,
		"strata_commit_duration_seconds":               dto.MetricType_HISTOGRAM,
	}
	for name, typ := range want {
		fam := fams[name]
		if fam == nil || fam.GetType() != typ {
			t.Errorf("%s: %v, want a %v", name, fam.GetType(), typ)
		}
	}
	if got := fams["strata_append_duration_seconds"].GetMetric()[0].GetHistogram().GetSampleCount(); got != 1 {
		t.Errorf("append histogram: %d observations, want 1", got)
	}
	var putIfAbsent uint64
	for _, m := range fams["strata_object_store_request_duration_seconds"].GetMetric() {
		for _, l := range m.Label {
			if l.GetName() == "op" && l.GetValue() == "put_if_absent" {
				putIfAbsent += m.GetHistogram().GetSampleCount()
			}
		}
	}
	if putIfAbsent == 0 {
		t.Error("no conditional create timed")
	}
	if !hasTable(fams["strata_object_store_requests_total"], "t") || hasTable(fams["strata_object_store_requests_total"], "broken") {
		t.Error("object-store series: want table t, and none for the table that failed to be created")
	}
	if v := fams["strata_build_info"].GetMetric()[0]; !strings.Contains(v.String(), "revision") {
		t.Errorf("build info without its labels: %v", v)
	}
	// A dropped table's series go.
	if err := f.c.Drop(ctx, "t"); err != nil {
		t.Fatal(err)
	}
	if fams := scrape(t, f); hasTable(fams["strata_object_store_requests_total"], "t") || hasTable(fams["strata_wal_lag_entries"], "t") {
		t.Error("series of a dropped table remain")
	}
}

// A failure of the server's background work is counted by what failed,
// beside its log line: a flush (POST …/lsm/flush, run in the background)
// whose objects the store refuses. Before, the metrics listener heard
// flushes and merges only to time them, and a failing flush moved no
// series.
func TestBackgroundFailuresAreCounted(t *testing.T) {
	f := start(t, "file://"+t.TempDir(), server.Options{Log: slog.New(slog.DiscardHandler)})
	if _, err := f.c.CreateTable(ctx, "t", rollouts.Schema); err != nil {
		t.Fatal(err)
	}
	rec := rollouts.Batch(testenv.Allocator(t), 42, 0, 0, 10)
	defer rec.Release()
	if _, err := f.c.Append(ctx, "t", rec); err != nil {
		t.Fatal(err)
	}
	f.inject(fault.OnKeys(regexp.MustCompile(`^_fleet/flush/`), fault.Always(fault.Fault{Action: fault.Fail, Err: errors.New("access denied")})))
	if err := f.c.Flush(ctx, "t"); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 10*time.Second, "a failed flush counted", func() bool {
		for _, m := range scrape(t, f)["strata_background_failures_total"].GetMetric() {
			for _, l := range m.Label {
				if l.GetName() == "what" && l.GetValue() == "flush" && m.GetCounter().GetValue() >= 1 {
					return true
				}
			}
		}
		return false
	})
}
