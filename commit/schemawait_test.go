package commit_test

import (
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/stratadb/strata/commit"
	"github.com/stratadb/strata/table/evolve"
	"github.com/stratadb/strata/table/format"
)

// A schema change marks its schema id before it commits, and one that
// takes a column away answers only once the table's shards can no longer
// acknowledge rows under the schema before it (Options.SchemaWait); a
// table without shards has nothing to wait for, and neither has a change
// that takes nothing away.
func TestADropWaitsOutTheShardsLeasesOnlyWhenTheTableHasShards(t *testing.T) {
	sc := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}, {Name: "x", Type: arrow.PrimitiveTypes.Int64, Nullable: true}}, nil)
	const wait = 300 * time.Millisecond
	timed := func(tb *commit.Table, c evolve.ColumnChange) time.Duration {
		t.Helper()
		start := time.Now()
		if _, err := tb.Alter(ctx, c); err != nil {
			t.Fatal(err)
		}
		return time.Since(start)
	}
	b := open(t, "mem://")
	if _, err := commit.Create(ctx, b, sc, nil, nil); err != nil {
		t.Fatal(err)
	}
	tb, err := commit.OpenTable(ctx, b, &commit.Options{SchemaWait: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	// No shard: the drop answers at once (an hour's wait would time the
	// test out).
	timed(tb, evolve.ColumnChange{Op: evolve.DropColumn, Column: "x"})
	if ok, err := evolve.SchemaMarked(ctx, b, 1); err != nil || !ok {
		t.Fatalf("the marker of schema 1 after the drop: %v, %v", ok, err)
	}
	if err := b.PutIfAbsent(ctx, format.ShardEpochKey("w1", 1), []byte("{}")); err != nil {
		t.Fatal(err)
	}
	// An add takes nothing away: no wait, with shards too.
	timed(tb, evolve.ColumnChange{Op: evolve.AddColumn, Column: "y", Type: arrow.PrimitiveTypes.Int64})
	if ok, err := evolve.SchemaMarked(ctx, b, 2); err != nil || !ok {
		t.Fatalf("the marker of schema 2 after the add: %v, %v", ok, err)
	}
	tb, err = commit.OpenTable(ctx, b, &commit.Options{SchemaWait: wait})
	if err != nil {
		t.Fatal(err)
	}
	if d := timed(tb, evolve.ColumnChange{Op: evolve.DropColumn, Column: "y"}); d < wait {
		t.Fatalf("a drop on a table with a shard answered after %v, before its wait of %v", d, wait)
	}
	// A restore to v3 (id, y) takes nothing away from v4 (id): no wait.
	patient, err := commit.OpenTable(ctx, b, &commit.Options{SchemaWait: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := patient.Restore(ctx, 3); err != nil {
		t.Fatal(err)
	}
	// A restore to v1 (id, x) takes y away: it waits.
	start := time.Now()
	if _, err := tb.Restore(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d < wait {
		t.Fatalf("a restore that took a column away answered after %v, before its wait of %v", d, wait)
	}
}
