package compactor_test

import (
	"flag"
	"path/filepath"
	"testing"
	"time"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/blob/trace"
	"github.com/stratadb/strata/commit"
	"github.com/stratadb/strata/compactor"
	"github.com/stratadb/strata/harness/rollouts"
	"github.com/stratadb/strata/harness/testenv"
	"github.com/stratadb/strata/walshard"
)

var updateTraces = flag.Bool("update-traces", false, "rewrite the golden request traces under testdata/trace")

// The object-store requests of a compaction and then a collection of a
// table of four appends and a shard's merge, compared with files under
// testdata/trace: a change in what an operation costs shows in review.
// (The append's and the merge's traces are beside the packages that make
// them: commit and walshard.)
func TestGoldenTraces(t *testing.T) {
	// A local folder, which deletes in batches as S3 does.
	under, err := blob.Open(ctx, "file://"+t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	b := trace.Wrap(under)
	if _, err := commit.Create(ctx, b, rollouts.Schema, nil, nil); err != nil {
		t.Fatal(err)
	}
	tb, err := commit.OpenTable(ctx, b, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 4 {
		rec := rollouts.Batch(testenv.Allocator(t), 42, 0, int64(i*10), 10)
		_, err := tb.Append(ctx, rec)
		rec.Release()
		if err != nil {
			t.Fatal(err)
		}
	}
	s, err := walshard.Open(ctx, b, &walshard.Options{Shard: "w1", FlushInterval: time.Hour, MergeInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	rec := rollouts.Batch(testenv.Allocator(t), 42, 1, 0, 10)
	defer rec.Release()
	if err := s.Append(ctx, rec); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Merge(ctx); err != nil {
		t.Fatal(err)
	}
	record := func(name string, fn func() error) {
		t.Helper()
		lines, err := b.Record(fn)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		trace.Golden(t, filepath.Join("testdata", "trace", name+".golden"), trace.Text(name, lines), *updateTraces,
			"go test ./compactor -run TestGoldenTraces -update-traces")
	}
	record("compaction", func() error {
		_, err := compactor.Compact(ctx, b, &compactor.Policy{MinFragments: 2}, &compactor.Options{Parallelism: 1, Holder: "trace"})
		return err
	})
	record("gc", func() error {
		_, err := compactor.GC(ctx, b, &compactor.GCPolicy{KeepVersions: 1}, time.Now().Add(2*time.Hour))
		return err
	})
}
