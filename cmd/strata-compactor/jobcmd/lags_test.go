package jobcmd

import (
	"io"
	"log/slog"
	"maps"
	"testing"
	"time"

	"github.com/stratadb/strata/harness/rollouts"
	"github.com/stratadb/strata/harness/testenv"
	"github.com/stratadb/strata/internal/telemetry"
	"github.com/stratadb/strata/job"
	"github.com/stratadb/strata/walshard"
)

// The Job exports every shard's lag as its pass read it, under the
// server's names and labels, so that the lag alerts see workers' shards:
// before, only a server's own shard had these series. Worker w1 holds
// WAL entries it has not flushed, w2 two generations of which the
// pass merges one (one a shard a pass, here).
func TestTheJobExportsEveryShardsLag(t *testing.T) {
	u := "file://" + t.TempDir() + "/events"
	b := smallTable(t, u, 1)
	mem := testenv.Allocator(t) // checked after the shards close
	open := func(id string) *walshard.Shard {
		s, err := walshard.Open(ctx, b, &walshard.Options{Shard: id, FlushInterval: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	appendRows := func(s *walshard.Shard, from int64) {
		rec := rollouts.Batch(mem, 42, 1, from, 10)
		defer rec.Release()
		if err := s.Append(ctx, rec); err != nil {
			t.Fatal(err)
		}
	}
	w1, w2 := open("w1"), open("w2")
	for i := range 3 {
		appendRows(w1, int64(i*10))
	}
	for i := range 2 {
		appendRows(w2, 1000+int64(i*10))
		if _, err := w2.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
	m := newJobMetrics()
	o := job.Options{Tables: []string{u}, NoGC: true, Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	o.Fleet.MaxGenerations = 1
	m.wire(&o)
	if _, err := job.RunOnce(ctx, &o); err != nil {
		t.Fatal(err)
	}
	fams, err := m.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, f := range fams {
		for _, s := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range s.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if shard := labels["shard"]; shard != "" && labels["table"] == telemetry.TableLabel(u) {
				got[f.GetName()+" "+shard] = s.GetGauge().GetValue()
			}
		}
	}
	// w1's as its owner counts it (as the server exports its own): the
	// three entries and the fence of its opening.
	want := map[string]float64{
		"strata_wal_lag_entries w1": float64(w1.Stats().WALLag), "strata_generations_pending w1": 0,
		"strata_wal_lag_entries w2": 0, "strata_generations_pending w2": 1,
	}
	if !maps.Equal(got, want) {
		t.Fatalf("the Job's per-shard series: %v, want %v", got, want)
	}
}
