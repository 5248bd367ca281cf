package commit_test

import (
	"flag"
	"path/filepath"
	"testing"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/blob/trace"
	"github.com/stratadb/strata/commit"
	"github.com/stratadb/strata/harness/rollouts"
	"github.com/stratadb/strata/harness/testenv"
)

var updateTraces = flag.Bool("update-traces", false, "rewrite the golden request traces under testdata/trace")

// The object-store requests of an append to a table with three appends
// before it, compared with testdata/trace/commit-append.golden: a change
// in what a commit costs shows in review.
func TestGoldenTraceOfAnAppend(t *testing.T) {
	under, err := blob.Open(ctx, "mem://")
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
	appendOne := func(i int) error {
		rec := rollouts.Batch(testenv.Allocator(t), 42, 0, int64(i*10), 10)
		defer rec.Release()
		_, err := tb.Append(ctx, rec)
		return err
	}
	for i := range 3 {
		if err := appendOne(i); err != nil {
			t.Fatal(err)
		}
	}
	lines, err := b.Record(func() error { return appendOne(3) })
	if err != nil {
		t.Fatal(err)
	}
	trace.Golden(t, filepath.Join("testdata", "trace", "commit-append.golden"), trace.Text("commit-append", lines), *updateTraces,
		"go test ./commit -run TestGoldenTraceOfAnAppend -update-traces")
}
