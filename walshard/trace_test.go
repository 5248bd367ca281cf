package walshard_test

import (
	"flag"
	"path/filepath"
	"testing"
	"time"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/blob/trace"
	"github.com/stratadb/strata/commit"
	"github.com/stratadb/strata/harness/rollouts"
	"github.com/stratadb/strata/harness/testenv"
	"github.com/stratadb/strata/walshard"
)

var updateTraces = flag.Bool("update-traces", false, "rewrite the golden request traces under testdata/trace")

// The object-store requests of a shard's merge of one flushed generation
// into a table of four appends, compared with
// testdata/trace/shard-merge.golden: a change in what a merge costs shows
// in review.
func TestGoldenTraceOfAShardMerge(t *testing.T) {
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
	lines, err := b.Record(func() error { _, err := s.Merge(ctx); return err })
	if err != nil {
		t.Fatal(err)
	}
	trace.Golden(t, filepath.Join("testdata", "trace", "shard-merge.golden"), trace.Text("shard-merge", lines), *updateTraces,
		"go test ./walshard -run TestGoldenTraceOfAShardMerge -update-traces")
}
