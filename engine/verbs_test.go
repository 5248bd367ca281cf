package engine_test

import (
	"errors"
	"iter"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/engine"
	"github.com/stratadb/strata/harness/rollouts"
	"github.com/stratadb/strata/harness/testenv"
	"github.com/stratadb/strata/table"
	"github.com/stratadb/strata/table/expr"
	"github.com/stratadb/strata/table/format"
	"github.com/stratadb/strata/table/value"
)

// A verb that chooses rows by a filter sees the rows the process's own
// shard acknowledged and has not merged: the DB drains the shard first
// (flushed and merged), so a delete right after an append deletes them.
func TestADeleteSeesTheRowsItsShardAcknowledged(t *testing.T) {
	b, _ := blob.Open(ctx, "mem://")
	rolloutsTable(t, b, 1, 10) // ids 0…9, committed directly
	db, err := engine.Open(ctx, b, &engine.Options{Log: quiet, Shard: engine.ShardOptions{Shard: "w1"}})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rec := rollouts.Batch(testenv.Allocator(t), 42, 1, 100, 10) // ids 100…109, through the shard
	defer rec.Release()
	if _, err := db.Append(ctx, engine.AppendOptions{}, rec); err != nil {
		t.Fatal(err)
	}
	_, n, err := db.Delete(ctx, expr.Ge("id", value.Int(100)))
	if err != nil || n != 10 {
		t.Fatalf("delete of the shard's rows: %d deleted, %v; want 10", n, err)
	}
	snap, err := table.Open(ctx, b, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := snap.Manifest().Rows(); got != 10 {
		t.Fatalf("the table holds %d live rows, want the 10 committed directly", got)
	}
}

// A streamed append sent again under its name stores nothing more: it
// answers the first one's version as a duplicate, and the fragments it
// wrote before learning so are deleted, not left for garbage collection.
func TestAStreamedAppendSentAgainStoresNothingMore(t *testing.T) {
	b, _ := blob.Open(ctx, "mem://")
	rolloutsTable(t, b, 0, 0)
	db, err := engine.OpenNew(b, &engine.Options{Log: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows := func(yield func(arrow.RecordBatch, error) bool) {
		for i := range 3 {
			rec := rollouts.Batch(testenv.Allocator(t), 42, 0, int64(i*10), 10)
			ok := yield(rec, nil)
			rec.Release()
			if !ok {
				return
			}
		}
	}
	key := &format.Idempotency{Producer: "nightly-export", Digest: 7}
	first, err := db.AppendStream(ctx, engine.StreamOptions{Key: key}, rollouts.Schema, iter.Seq2[arrow.RecordBatch, error](rows))
	if err != nil || first.Duplicate || first.Rows != 30 {
		t.Fatalf("first append: %+v, %v", first, err)
	}
	before := keys(t, b, "data/")
	again, err := db.AppendStream(ctx, engine.StreamOptions{Key: key}, rollouts.Schema, iter.Seq2[arrow.RecordBatch, error](rows))
	if err != nil || !again.Duplicate || again.Version != first.Version || again.Rows != 30 {
		t.Fatalf("the same append again: %+v, %v; want a duplicate of version %d", again, err, first.Version)
	}
	if after := keys(t, b, "data/"); after != before {
		t.Fatalf("%d data objects after the duplicate, %d before: its fragments were left behind", after, before)
	}
}

// Drop deletes every object of the table and stops the DB: its shard
// closed, an append after it refused; the table is gone (not found).
func TestDropLeavesNothingAndStopsTheDB(t *testing.T) {
	b, _ := blob.Open(ctx, "mem://")
	rolloutsTable(t, b, 2, 10)
	db, err := engine.Open(ctx, b, &engine.Options{Log: quiet, Shard: engine.ShardOptions{Shard: "w1"}})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rec := rollouts.Batch(testenv.Allocator(t), 42, 1, 100, 10)
	defer rec.Release()
	if _, err := db.Append(ctx, engine.AppendOptions{}, rec); err != nil {
		t.Fatal(err)
	}
	if err := db.Drop(ctx, engine.DropOptions{Wait: -1}); err != nil {
		t.Fatal(err)
	}
	if n := keys(t, b, ""); n != 0 {
		t.Fatalf("the drop left %d objects", n)
	}
	if _, err := table.LatestVersion(ctx, b); !errors.Is(err, format.ErrNotFound) {
		t.Fatalf("the dropped table: %v, want not found", err)
	}
	if _, err := db.Append(ctx, engine.AppendOptions{}, rec); !errors.Is(err, engine.ErrClosed) {
		t.Fatalf("an append after the drop: %v, want ErrClosed", err)
	}
	if err := db.Drop(ctx, engine.DropOptions{Wait: -1}); !errors.Is(err, format.ErrNotFound) {
		t.Fatalf("a second drop: %v, want not found", err)
	}
}

// keys counts the objects under prefix.
func keys(t *testing.T, b blob.Bucket, prefix string) int {
	t.Helper()
	n := 0
	for _, err := range blob.List(ctx, b, prefix, 0) {
		if err != nil {
			t.Fatal(err)
		}
		n++
	}
	return n
}
