package commit_test

import (
	"testing"

	"github.com/stratadb/strata/commit"
	"github.com/stratadb/strata/table"
	"github.com/stratadb/strata/table/format"
)

// A merge installing a named append applies on the version it lands on:
// a name another merge or a direct append installed meanwhile makes it a
// retryable conflict (planned again, the copy dropped), and a name it
// installs is recorded, so that the next copy is dropped.
func TestAMergeThatWouldInstallANameTheTableRecordsPlansAgain(t *testing.T) {
	b, tb := idempotentTable(t)
	appendOnce(t, tb, format.Idempotency{Producer: "client", Seq: 1}, 1, 2)
	m, err := table.ReadLatest(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	rec := m.Producers[0].Recent[0]
	n := format.AppendKey{Producer: format.ProducerID("client"), Seq: 1, Digest: rec.Digest}
	other := format.AppendKey{Producer: format.ProducerID("client"), Seq: 2, Digest: 7}
	merge := func(shard string, named ...format.NamedRows) *format.Transaction {
		return &format.Transaction{Kind: format.KindMerge, Shard: shard, Watermark: 1, Epoch: 1,
			Added: []format.Fragment{{Key: "_shards/" + shard + "/x.parquet", Rows: 3}}, Named: named}
	}
	planned := []format.NamedRows{
		{AppendKey: n, Fragment: "_shards/w1/x.parquet", Offset: 0, Rows: 2},
		{AppendKey: other, Fragment: "_shards/w1/x.parquet", Offset: 2, Rows: 1},
	}
	if _, err := commit.Apply(m, merge("w1", planned...)); !commit.IsRetryableConflict(err) {
		t.Fatalf("a merge installing a name the table records: %v, want a retryable conflict", err)
	}
	next, err := commit.Apply(m, merge("w1", m.Producers.DropNamed(planned)...))
	if err != nil {
		t.Fatal(err)
	}
	if o, found, _ := next.Producers.Lookup(other); !found || o.At != next.Version || o.Rows != 1 {
		t.Fatalf("the name the merge installed: %+v %v, want recorded at v%d", o, found, next.Version)
	}
	// Another shard's merge of the second name, planned on m, lands after.
	late := merge("w2", format.NamedRows{AppendKey: other, Fragment: "_shards/w2/x.parquet", Rows: 1})
	if _, err := commit.Apply(next, late); !commit.IsRetryableConflict(err) {
		t.Fatalf("a merge planned before another installed its name: %v, want a retryable conflict", err)
	}
	// Planned again on next, it drops its copy.
	if _, err := commit.Apply(next, merge("w2", next.Producers.DropNamed(late.Named)...)); err != nil {
		t.Fatal(err)
	}
}

// A named upsert sent again after a later upsert of its key is not applied
// again: it answers its first version, and the later upsert's row stays.
func TestAnUpsertSentAgainAfterALaterUpsertOfItsKeyIsNotAppliedAgain(t *testing.T) {
	b, tb := idempotentTable(t)
	key := &format.Idempotency{Producer: "grader", Seq: 1}
	rec := idBatch(1)
	defer rec.Release()
	first, err := tb.UpsertOnce(ctx, key, []string{"id"}, rec)
	if err != nil || first.Duplicate {
		t.Fatalf("first upsert: %+v %v", first, err)
	}
	later, err := tb.Upsert(ctx, []string{"id"}, rec)
	if err != nil {
		t.Fatal(err)
	}
	other, err := commit.OpenTable(ctx, b, nil) // the retry, from another process
	if err != nil {
		t.Fatal(err)
	}
	again, err := other.UpsertOnce(ctx, key, []string{"id"}, rec)
	if err != nil || !again.Duplicate || again.Version != first.Version {
		t.Fatalf("the upsert sent again: %+v %v, want a duplicate of v%d", again, err, first.Version)
	}
	if m, err := table.ReadLatest(ctx, b); err != nil || m.Version != later.Version {
		t.Fatalf("latest version after the retry: %v %v, want v%d (the later upsert's)", m.Version, err, later.Version)
	}
}
