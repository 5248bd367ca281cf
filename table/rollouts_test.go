package table_test

import (
	"context"
	"testing"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/commit"
	"github.com/stratadb/strata/harness/rollouts"
	"github.com/stratadb/strata/harness/testenv"
)

// openRolloutsTable creates a rollouts table in b (in a new folder when b is
// nil) and opens it for commits.
func openRolloutsTable(t *testing.T, b blob.Bucket) (blob.Bucket, *commit.Table) {
	t.Helper()
	ctx := context.Background()
	if b == nil {
		var err error
		if b, err = blob.Open(ctx, "file://"+t.TempDir()); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := commit.Create(ctx, b, rollouts.Schema, nil, nil); err != nil {
		t.Fatal(err)
	}
	tb, err := commit.OpenTable(ctx, b, nil)
	if err != nil {
		t.Fatal(err)
	}
	return b, tb
}

// appendRollouts commits worker w's rows seq0 … seq0+n-1 in one append.
func appendRollouts(t *testing.T, tb *commit.Table, w int, seq0 int64, n int) commit.Result {
	t.Helper()
	rec := rollouts.Batch(testenv.Allocator(t), 42, w, seq0, n)
	defer rec.Release()
	res, err := tb.Append(context.Background(), rec)
	if err != nil {
		t.Fatal(err)
	}
	return res
}
