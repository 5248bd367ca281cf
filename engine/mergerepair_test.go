package engine_test

import (
	"log/slog"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/commit"
	"github.com/stratadb/strata/engine"
	"github.com/stratadb/strata/harness/rollouts"
	"github.com/stratadb/strata/harness/testenv"
	"github.com/stratadb/strata/table"
	"github.com/stratadb/strata/walshard"
)

// A merge of a shard's upserts whose deletion vector a collection took
// (its merger stalled past the safety age and died once its manifest
// landed) leaves a table that does not read. The Job's next merge meets
// the missing vector, repairs it (writes it again, as compactor.Repair
// does) and merges, rather than failing until a collection's repair.
func TestAMergeThatMeetsAMissingVectorRepairsAndMerges(t *testing.T) {
	under, err := blob.Open(ctx, "mem://")
	if err != nil {
		t.Fatal(err)
	}
	b := blob.NewCounted(under)
	if _, err := commit.Create(ctx, b, rollouts.Schema, nil, nil); err != nil {
		t.Fatal(err)
	}
	tb, err := commit.OpenTable(ctx, b, nil)
	if err != nil {
		t.Fatal(err)
	}
	for id := int64(0); id < 10; id += 2 { // ids 0..9, two a fragment
		rec := rollouts.Batch(testenv.Allocator(t), 42, 0, id, 2)
		if _, err := tb.Append(ctx, rec); err != nil {
			t.Fatal(err)
		}
		rec.Release()
	}
	s, err := walshard.Open(ctx, b, &walshard.Options{Shard: "grader"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	upsert := func(first int64) {
		t.Helper()
		rec := rollouts.Batch(testenv.Allocator(t), 42, 0, first, 1)
		defer rec.Release()
		if err := s.Upsert(ctx, []string{"id"}, rec); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
	upsert(2) // id 2 again
	if err := s.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	m, err := table.ReadLatest(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Transaction.Deletions) != 1 {
		t.Fatalf("the merge of upserts wrote %d vectors, want 1", len(m.Transaction.Deletions))
	}
	if err := b.Delete(ctx, m.Transaction.Deletions[0].Deletion.Key); err != nil {
		t.Fatal(err)
	}
	upsert(3) // id 3: a merge that must read the vector of the fragment of ids 2 and 3
	db, err := engine.Open(ctx, b, &engine.Options{Writer: "job", Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	before := b.Stats()
	res, err := db.Merge(ctx)
	if err != nil || res.Generations != 1 {
		t.Fatalf("the Job's merge: %+v %v, want the generation merged after a repair", res, err)
	}
	// The repair looked for the object the error named, not for every
	// object of the table.
	if after := b.Stats(); after.Heads-before.Heads > 2 {
		t.Fatalf("the merge and its repair made %d HEADs, want the missing vector looked for alone", after.Heads-before.Heads)
	}
	snap, err := table.Open(ctx, b, nil)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int64]int{}
	for rec, err := range snap.Scan(ctx, table.ScanOptions{Columns: []string{"id"}}) {
		if err != nil {
			t.Fatal(err)
		}
		for _, id := range rec.Column(0).(*array.Int64).Int64Values() {
			seen[id]++
		}
	}
	for id := int64(0); id < 10; id++ {
		if seen[id] != 1 {
			t.Fatalf("id %d read %d times after the repair and merge, want once (%v)", id, seen[id], seen)
		}
	}
}
