package compactor_test

import (
	"context"
	"errors"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/commit"
	"github.com/stratadb/strata/compactor"
	"github.com/stratadb/strata/harness/rollouts"
	"github.com/stratadb/strata/harness/testenv"
	"github.com/stratadb/strata/table/expr"
	"github.com/stratadb/strata/table/format"
	"github.com/stratadb/strata/table/value"
)

// duringCompaction runs land once, after the run has read all its
// sources and before it commits: a writer's commit racing it.
func duringCompaction(t *testing.T, land func()) *compactor.Options {
	t.Helper()
	landed := false
	return &compactor.Options{OnProgress: func(done, total int64) {
		if !landed && done >= total {
			landed = true
			land()
		}
	}}
}

func deleteWhere(t *testing.T, b blob.Bucket, pred expr.Predicate, want int64) {
	t.Helper()
	tb, err := commit.OpenTable(ctx, b, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, n, err := tb.Delete(ctx, pred); err != nil || n != want {
		t.Fatalf("delete: %d rows, want %d; %v", n, want, err)
	}
}

// A delete landing on a compaction's sources while it writes them does
// not send it back to read and write them again: it carries the rows
// deleted since onto its output as a deletion vector, and commits. The
// delete holds (its rows stay gone), every other row is there once, and
// the next compaction drops the deleted rows from the bytes.
func TestACompactionCarriesADeleteThatLandedOnItsSourcesFile(t *testing.T) {
	carriesADelete(t, "file://"+t.TempDir())
}

func TestACompactionCarriesADeleteThatLandedOnItsSourcesMinIO(t *testing.T) {
	carriesADelete(t, testenv.MinIO(t).URL(t))
}

func carriesADelete(t *testing.T, u string) {
	b := rolloutsTable(t, u, 0, 6, 20) // steps 0..119, 20 a fragment
	// A vector before the run (rows 0..9 of the first source), which the
	// delete during it grows: rows are mapped past the ones deleted.
	deleteWhere(t, b, expr.Lt("step", value.Int(10)), 10)
	var want map[int64][32]byte
	opts := duringCompaction(t, func() {
		deleteWhere(t, b, expr.Or(expr.Lt("step", value.Int(15)), expr.And(expr.Ge("step", value.Int(38)), expr.Lt("step", value.Int(63)))), 30)
		want = digest(t, b)
	})
	res, err := compactor.Compact(ctx, b, &compactor.Policy{}, opts)
	if err != nil || res.Version == 0 || res.Rebases != 1 || res.Replans != 0 || res.FragmentsAfter != 1 || res.RowsAfter != 80 {
		t.Fatalf("compaction: %+v, %v", res, err)
	}
	sameRows(t, want, digest(t, b), "a compaction that carried a delete")
	m := readManifest(t, b)
	if f := m.Fragments[0]; f.Rows != 110 || f.Deletion == nil || f.Deletion.Count != 30 {
		t.Fatalf("the compacted fragment: %d rows, deletion %+v; want 110 rows, 30 deleted", f.Rows, f.Deletion)
	}
	res, err = compactor.Compact(ctx, b, &compactor.Policy{}, nil)
	if err != nil || res.Version == 0 {
		t.Fatalf("the compaction after: %+v, %v", res, err)
	}
	if f := readManifest(t, b).Fragments[0]; f.Rows != 80 || f.Deletion != nil {
		t.Fatalf("compacted again: %d rows, deletion %+v", f.Rows, f.Deletion)
	}
	sameRows(t, want, digest(t, b), "the compaction after")
}

// A commit that gives a source rows back (a vector that lacks rows the
// one the run read deleted, as an undo's does) cannot be carried: the
// output lacks those rows. The run plans again, and the rows are there.
func TestACompactionPlansAgainWhenASourceGotRowsBack(t *testing.T) {
	b := rolloutsTable(t, "mem://", 0, 3, 20)
	deleteWhere(t, b, expr.Lt("step", value.Int(10)), 10)
	opts := duringCompaction(t, func() {
		m := readManifest(t, b)
		f := m.Fragments[0]
		key := format.DeletionKey(f.ID, m.Version+1)
		if err := b.PutIfAbsent(ctx, key, format.EncodeDeletions([]uint32{0, 1, 2})); err != nil {
			t.Fatal(err)
		}
		txn := format.Transaction{Kind: format.KindDelete, Deletions: []format.FragmentDeletion{{FragmentID: f.ID, Deletion: format.Deletion{Key: key, Count: 3}}}}
		if _, err := commit.Commit(ctx, b, m, txn, nil); err != nil {
			t.Fatal(err)
		}
	})
	res, err := compactor.Compact(ctx, b, &compactor.Policy{}, opts)
	if err != nil || res.Rebases != 0 || res.Replans != 1 || res.RowsAfter != 57 {
		t.Fatalf("compaction: %+v, %v", res, err)
	}
	if rows := len(digest(t, b)); rows != 57 {
		t.Fatalf("%d rows, want 57", rows)
	}
}

// A sorted bin's rows are not where its sources' order puts them: a
// delete on its sources sends the run back to plan again.
func TestASortedCompactionPlansAgainAfterADelete(t *testing.T) {
	b := rolloutsTable(t, "mem://", 0, 3, 20)
	clusterBy(t, b, "reward")
	opts := duringCompaction(t, func() { deleteWhere(t, b, expr.Lt("step", value.Int(5)), 5) })
	res, err := compactor.Compact(ctx, b, &compactor.Policy{}, opts)
	if err != nil || res.Rebases != 0 || res.Replans != 1 || res.RowsAfter != 55 {
		t.Fatalf("compaction: %+v, %v", res, err)
	}
	if rows := len(digest(t, b)); rows != 55 {
		t.Fatalf("%d rows, want 55", rows)
	}
}

// deleteBeforeCommits lands a delete of one more row before each commit
// made through it: every one of a compaction's commits loses.
type deleteBeforeCommits struct {
	blob.Bucket
	t    *testing.T
	step int64
}

func (d *deleteBeforeCommits) PutIfAbsent(ctx context.Context, key string, data []byte) error {
	if strings.HasPrefix(key, format.VersionsDir) {
		deleteWhere(d.t, d.Bucket, expr.Eq("step", value.Int(d.step)), 1)
		d.step++
	}
	return d.Bucket.PutIfAbsent(ctx, key, data)
}

// Deletes landing before every commit use up the run's plans (at
// MaxReplans 1, two plans' worth: 10): the run stops with the budget error and leaves
// nothing it wrote behind, and every delete holds.
func TestACompactionOutOfPlansLeavesNothing(t *testing.T) {
	b := rolloutsTable(t, "mem://", 0, 3, 20)
	keys := func(prefix string) map[string]bool {
		out := map[string]bool{}
		for o, err := range blob.List(ctx, b, prefix, 1000) {
			if err != nil {
				t.Fatal(err)
			}
			out[o.Key] = true
		}
		return out
	}
	data, dels := keys(format.DataDir), len(keys(format.DeletionsDir))
	d := &deleteBeforeCommits{Bucket: b, t: t}
	res, err := compactor.Compact(ctx, d, &compactor.Policy{}, &compactor.Options{MaxReplans: 1})
	if !errors.Is(err, commit.ErrBudget) || res.Rebases != 9 {
		t.Fatalf("compaction: %+v, %v; want the budget error after a plan and 9 rebases", res, err)
	}
	if got := keys(format.DataDir); !maps.Equal(got, data) {
		t.Fatalf("data objects: %d before, %d after", len(data), len(got))
	}
	if got := len(keys(format.DeletionsDir)); got != dels+int(d.step) {
		t.Fatalf("%d deletion vectors, want %d: one a delete", got, dels+int(d.step))
	}
	if rows := len(digest(t, b)); rows != 60-int(d.step) {
		t.Fatalf("%d rows, want %d", rows, 60-d.step)
	}
}

// Deletes of single rows land back to back on every source of a
// compaction, each taking a fraction of the run's time: the run still
// commits (before, each plan lost to the next delete until the budget ran
// out), and every delete holds.
func TestACompactionLandsAmidBackToBackDeletes(t *testing.T) {
	b := rolloutsTable(t, "file://"+t.TempDir(), 0, 20, 50)
	stop := make(chan struct{})
	deleted := make(chan int64)
	go func() {
		n := int64(0)
		defer func() { deleted <- n }()
		tb, err := commit.OpenTable(ctx, b, nil)
		if err != nil {
			t.Error(err)
			return
		}
		for step := int64(0); ; step += 7 {
			select {
			case <-stop:
				return
			default:
			}
			_, d, err := tb.Delete(ctx, expr.Eq("step", value.Int(step%1000)))
			if err != nil {
				t.Error(err)
				return
			}
			n += d
		}
	}()
	res, err := compactor.Compact(ctx, b, &compactor.Policy{}, nil)
	close(stop)
	n := <-deleted
	if err != nil || res.Version == 0 {
		t.Fatalf("compaction amid deletes: %+v, %v", res, err)
	}
	if rows := len(digest(t, b)); int64(rows) != 1000-n {
		t.Fatalf("%d rows after %d deleted, want %d", rows, n, 1000-n)
	}
	t.Logf("compacted with %d plans again and %d rebases while %d rows were deleted one by one", res.Replans, res.Rebases, n)
}

// On a table with a key index, a compaction that carried a delete records
// where the rows went as any does: Take finds every live row through the
// index, and none of the deleted ones.
func TestTakeFindsRowsAfterACompactionCarriedADelete(t *testing.T) {
	b := rolloutsTable(t, "mem://", 0, 6, 25) // ids 0..149
	deleteWhere(t, b, expr.In("id", value.Int(3), value.Int(4)), 2)
	tb, err := commit.OpenTable(ctx, b, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tb.CreateIndex(ctx, "id"); err != nil {
		t.Fatal(err)
	}
	opts := duringCompaction(t, func() {
		deleteWhere(t, b, expr.In("id", value.Int(5), value.Int(60), value.Int(149)), 3)
	})
	res, err := compactor.Compact(ctx, b, &compactor.Policy{}, opts)
	if err != nil || res.Rebases != 1 || res.Replans != 0 {
		t.Fatalf("compaction: %+v, %v", res, err)
	}
	got, tr := take(t, b, 2, 3, 4, 5, 6, 59, 60, 61, 148, 149)
	checkRows(t, got, 2, 6, 59, 61, 148)
	if tr.FromIndex != 5 {
		t.Fatalf("take: %+v", tr)
	}
}

// Garbage collection keeps the deletion vectors a kept version's remap
// entries name: a lookup through the key index ranks a rewritten
// fragment's rows by the vector it had (compacted plainly or rebased),
// and a take or an upsert by key after the collection reads it.
func TestGCKeepsTheVectorsRemapEntriesName(t *testing.T) {
	for _, rebased := range []bool{false, true} {
		b := rolloutsTable(t, "mem://", 0, 6, 25) // ids 0..149
		deleteWhere(t, b, expr.In("id", value.Int(3), value.Int(4)), 2)
		tb, err := commit.OpenTable(ctx, b, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tb.CreateIndex(ctx, "id"); err != nil {
			t.Fatal(err)
		}
		var opts *compactor.Options
		if rebased {
			opts = duringCompaction(t, func() { deleteWhere(t, b, expr.In("id", value.Int(5), value.Int(60)), 2) })
		}
		if res, err := compactor.Compact(ctx, b, &compactor.Policy{}, opts); err != nil || res.Rebases != map[bool]int{true: 1}[rebased] {
			t.Fatalf("compaction: %+v, %v", res, err)
		}
		if _, err := compactor.GC(ctx, b, &compactor.GCPolicy{KeepVersions: 1, RetainFor: time.Hour, SafetyAge: time.Hour}, time.Now().Add(2*time.Hour)); err != nil {
			t.Fatal(err)
		}
		got, _ := take(t, b, 2, 3, 6, 61)
		checkRows(t, got, 2, 6, 61)
		rec := rollouts.Batch(testenv.Allocator(t), 42, 0, 10, 1)
		if _, err := tb.Upsert(ctx, []string{"id"}, rec); err != nil {
			t.Fatalf("upsert after the collection (rebased %v): %v", rebased, err)
		}
		rec.Release()
	}
}
