package jobcmd

import (
	"bytes"
	"context"
	"net/http"
	"regexp"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/stratadb/strata/harness/rollouts"
	"github.com/stratadb/strata/harness/testenv"
	"github.com/stratadb/strata/walshard"
)

// syncBuffer is a bytes.Buffer safe to write from the Job and read here.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// The Job in interval mode serves its metrics: passes, what it did to each
// table, fleet merges, object-store requests, the runtime and the build.
func TestIntervalJobServesMetrics(t *testing.T) {
	u := "file://" + t.TempDir()
	b := smallTable(t, u, 6)
	s, err := walshard.Open(ctx, b, &walshard.Options{Shard: "w1", FlushInterval: time.Hour, MergeInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	rec := rollouts.Batch(testenv.Allocator(t), 42, 1, 1000, 10)
	defer rec.Release()
	if err := s.Append(ctx, rec); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	jctx, cancel := context.WithCancel(ctx)
	var stdout, stderr syncBuffer
	done := make(chan int)
	go func() {
		done <- Main(jctx, []string{"--interval", "100ms", "--table", u, "--min-fragments", "2", "--no-gc", "--metrics-listen", "127.0.0.1:0"}, nil, &stdout, &stderr)
	}()
	defer func() {
		cancel()
		if code := <-done; code != 0 {
			t.Errorf("the Job exited %d\n%s", code, stderr.String())
		}
	}()
	addr := regexp.MustCompile(`"msg":"metrics listening","listen":"([^"]+)"`)
	deadline := time.Now().Add(20 * time.Second)
	var fams map[string]*dto.MetricFamily
	for {
		if time.Now().After(deadline) {
			t.Fatalf("no metrics showing a compaction and a fleet merge: %v\n%s", fams, stderr.String())
		}
		time.Sleep(50 * time.Millisecond)
		m := addr.FindStringSubmatch(stderr.String())
		if m == nil {
			continue
		}
		resp, err := http.Get("http://" + m[1] + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		parser := expfmt.NewTextParser(model.UTF8Validation)
		fams, err = parser.TextToMetricFamilies(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatalf("metrics do not parse: %v", err)
		}
		if counter(fams, "strata_compactor_tables_total", "outcome", "compacted") >= 1 &&
			counter(fams, "strata_compactor_fleet_merges_total", "outcome", "committed") >= 1 {
			break
		}
	}
	if resp, err := http.Get("http://" + addr.FindStringSubmatch(stderr.String())[1] + "/healthz"); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("/healthz for probes: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}
	for name, typ := range map[string]dto.MetricType{
		"go_goroutines":                                   dto.MetricType_GAUGE,
		"process_cpu_seconds_total":                       dto.MetricType_COUNTER,
		"strata_build_info":                               dto.MetricType_GAUGE,
		"strata_compactor_passes_total":                   dto.MetricType_COUNTER,
		"strata_compactor_pass_duration_seconds":          dto.MetricType_HISTOGRAM,
		"strata_compactor_table_fragments":                dto.MetricType_GAUGE,
		"strata_compactor_fleet_merge_duration_seconds":   dto.MetricType_HISTOGRAM,
		"strata_compactor_fleet_merged_generations_total": dto.MetricType_COUNTER,
		"strata_object_store_request_duration_seconds":    dto.MetricType_HISTOGRAM,
	} {
		if f := fams[name]; f == nil || f.GetType() != typ {
			t.Errorf("%s: %v, want a %v", name, f.GetType(), typ)
		}
	}
}

// counter sums the family's series whose label has the value.
func counter(fams map[string]*dto.MetricFamily, name, label, value string) float64 {
	var n float64
	for _, m := range fams[name].GetMetric() {
		for _, l := range m.Label {
			if l.GetName() == label && l.GetValue() == value {
				n += m.GetCounter().GetValue()
			}
		}
	}
	return n
}
