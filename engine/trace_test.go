package engine_test

import (
	"flag"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/blob/trace"
	"github.com/stratadb/strata/compactor"
	"github.com/stratadb/strata/engine"
	"github.com/stratadb/strata/harness/rollouts"
	"github.com/stratadb/strata/harness/testenv"
	"github.com/stratadb/strata/walshard"
	"github.com/stratadb/strata/walshard/fleetmerge"
)

var updateTraces = flag.Bool("update-traces", false, "rewrite the golden request traces under testdata/trace")

// The object-store requests of what production runs, each driven through
// the engine as the server, a worker and the Job drive it, compared with
// files under testdata/trace: a change in what a path costs shows in
// review. A worker appends through its shard and flushes; the Job's fleet
// merge installs the generation; an upsert through the shard is flushed
// and merged by key; then the Job's maintenance pass over a table of
// twenty appends (merge, compaction, collection).
func TestGoldenTracesOfTheProductionPaths(t *testing.T) {
	// A local folder, which deletes in batches as S3 does.
	under, err := blob.Open(ctx, "file://"+t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	b := trace.Wrap(under)
	rolloutsTable(t, b, 4, 10)
	var got strings.Builder
	record := func(name string, fn func() error) {
		t.Helper()
		lines, err := b.Record(fn)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		got.WriteString(trace.Text(name, lines))
	}
	worker, err := engine.OpenNew(b, &engine.Options{Name: "t", Writer: "worker", Log: quiet,
		Shard: walshard.Options{Shard: "w1", FlushInterval: time.Hour}})
	if err != nil {
		t.Fatal(err)
	}
	defer worker.Close()
	s, err := worker.Shard(ctx)
	if err != nil {
		t.Fatal(err)
	}
	job, err := engine.OpenNew(b, &engine.Options{Name: "t", Writer: "job", Log: quiet,
		Fleet: fleetmerge.Options{Parallelism: 1, MemoryBudget: compactor.DefaultMemoryBudget}})
	if err != nil {
		t.Fatal(err)
	}
	defer job.Close()
	rec := rollouts.Batch(testenv.Allocator(t), 42, 1, 0, 10)
	defer rec.Release()
	record("append", func() error { _, err := worker.Append(ctx, engine.AppendOptions{}, rec); return err })
	record("flush", func() error { _, err := worker.Flush(ctx); return err })
	record("fleet-merge", func() error { _, err := job.Merge(ctx); return err })
	up := rollouts.Batch(testenv.Allocator(t), 42, 1, 5, 3)
	defer up.Release()
	record("upsert", func() error { return s.Upsert(ctx, []string{"id"}, up) })
	record("upsert-flush", func() error { _, err := worker.Flush(ctx); return err })
	record("upsert-merge", func() error { _, err := job.Merge(ctx); return err })
	for i := range 16 { // appends without a shard: one commit each
		rec := rollouts.Batch(testenv.Allocator(t), 42, 2, int64(i*10), 10)
		_, err := job.Append(ctx, engine.AppendOptions{}, rec)
		rec.Release()
		if err != nil {
			t.Fatal(err)
		}
	}
	record("maintenance-pass", func() error {
		out := job.Maintain(ctx, engine.MaintainOptions{Tune: compactor.Options{Parallelism: 1}})
		return out.Err
	})
	trace.Golden(t, filepath.Join("testdata", "trace", "production.golden"), got.String(), *updateTraces,
		"go test ./engine -run TestGoldenTracesOfTheProductionPaths -update-traces")
}
