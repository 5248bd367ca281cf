package compactor_test

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/commit"
	"github.com/stratadb/strata/compactor"
	"github.com/stratadb/strata/harness/rollouts"
	"github.com/stratadb/strata/harness/testenv"
	"github.com/stratadb/strata/table"
	"github.com/stratadb/strata/table/changes"
	"github.com/stratadb/strata/table/expr"
	"github.com/stratadb/strata/table/format"
	"github.com/stratadb/strata/table/fragment"
	"github.com/stratadb/strata/walshard"
)

// ghost lands txn's manifest on the newest version the way a writer does
// that stalled past garbage collection (whose orphan record then lists
// its objects, deleted) and died after its create landed, before it could
// check and undo: no finish, no acknowledgement.
func ghost(t *testing.T, b blob.Bucket, txn format.Transaction, lost []format.Fragment) uint64 {
	t.Helper()
	keys := make([]string, len(lost))
	for i, f := range lost {
		keys[i] = f.Key
	}
	// The collection: its orphan record, then the deletes.
	if err := format.WriteOrphanRecord(ctx, b, keys, time.Now()); err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		if err := b.Delete(ctx, k); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(10 * time.Millisecond) // the store's clock moves between the two creates
	cur, err := table.ReadLatest(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	txn.CommitID, txn.ReadVersion = format.NewID(), cur.Version
	next, err := commit.Apply(cur, &txn)
	if err != nil {
		t.Fatal(err)
	}
	data, err := format.EncodeManifest(next)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.PutIfAbsent(ctx, format.ManifestKey(next.Version), data); err != nil {
		t.Fatal(err)
	}
	return next.Version
}

// A writer stalled past GC and died after its manifest landed: the newest
// version references a fragment that garbage collection deleted as an
// orphan before that manifest existed, and nothing reads. The next
// collection undoes that commit (never acknowledged) and deletes nothing
// more; the table reads again, with every other row.
func TestGCRepairsAVersionWhoseAppendLostItsData(t *testing.T) {
	b := rolloutsTable(t, "mem://", 0, 3, 10) // v2..v4, 30 rows
	rec := rollouts.Batch(testenv.Allocator(t), 42, 1, 0, 10)
	defer rec.Release()
	f, err := fragment.Write(ctx, b, rollouts.Schema, rec)
	if err != nil {
		t.Fatal(err)
	}
	v := ghost(t, b, format.Transaction{Kind: format.KindAppend, Added: []format.Fragment{f}}, []format.Fragment{f})
	if _, err := table.Open(ctx, b, nil); err != nil {
		t.Fatal(err)
	}
	res, err := compactor.GC(ctx, b, &compactor.GCPolicy{}, time.Now().Add(2*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Repaired) != 1 || res.Repaired[0] != v || len(res.ObjectsDeleted) != 0 {
		t.Fatalf("collection: %+v, want v%d repaired and nothing else deleted", res, v)
	}
	s, err := table.Open(ctx, b, nil)
	if err != nil {
		t.Fatal(err)
	}
	if rows := len(digest(t, b)); rows != 30 {
		t.Fatalf("v%d reads %d rows, want the 30 of the appends whose data is there", s.Version(), rows)
	}
	if _, err := compactor.Compact(ctx, b, &compactor.Policy{MinFragments: 2}, nil); err != nil {
		t.Fatalf("compaction after the repair: %v", err)
	}
	if undo := s.Manifest().Transaction; undo.Undoes != v {
		t.Fatalf("v%d undoes v%d, want v%d", s.Version(), undo.Undoes, v)
	}
}

// Data missing for any other reason — deleted by hand, lost by the store —
// was acknowledged: nothing is undone, GC deletes nothing and fails
// naming the objects, scans name them too, and putting the objects back
// loses nothing. This is the case of a merge's generation gone missing.
func TestMissingDataIsReportedNeverUndone(t *testing.T) {
	b := rolloutsTable(t, "mem://", 0, 3, 10) // v2..v4
	sh, err := walshard.Open(ctx, b, &walshard.Options{Shard: "w1"})
	if err != nil {
		t.Fatal(err)
	}
	for g := range 3 {
		rec := rollouts.Batch(testenv.Allocator(t), 42, 1, int64(500*g), 500)
		if err := sh.Append(ctx, rec); err != nil {
			t.Fatal(err)
		}
		rec.Release()
		if _, err := sh.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
	mres, err := sh.Merge(ctx)
	if err != nil || mres.Generations != 3 {
		t.Fatalf("merge: %+v %v", mres, err)
	}
	sh.Close()
	before := digest(t, b)
	m, err := table.ReadLatest(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	gone := m.Transaction.Added[1]
	data, err := b.Get(ctx, gone.Key)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Delete(ctx, gone.Key); err != nil {
		t.Fatal(err)
	}
	for _, run := range []func() error{
		func() error {
			_, err := compactor.GC(ctx, b, &compactor.GCPolicy{}, time.Now().Add(2*time.Hour))
			return err
		},
		func() error { _, err := compactor.Compact(ctx, b, &compactor.Policy{MinFragments: 2}, nil); return err },
		func() error {
			s, err := table.Open(ctx, b, nil)
			if err != nil {
				t.Fatal(err)
			}
			for _, err := range s.Scan(ctx, table.ScanOptions{}) {
				if err != nil {
					return err
				}
			}
			return nil
		},
	} {
		err := run()
		var me *format.MissingDataError
		if !errors.As(err, &me) || !slices.Contains(me.Keys, gone.Key) {
			t.Fatalf("with %s gone: %v", gone.Key, err)
		}
	}
	if after, _ := table.ReadLatest(ctx, b); after.Version != m.Version {
		t.Fatalf("the table moved from v%d to v%d", m.Version, after.Version)
	}
	// Put back: every row, and the collection goes on.
	if err := b.PutIfAbsent(ctx, gone.Key, data); err != nil {
		t.Fatal(err)
	}
	sameRows(t, before, digest(t, b), "the object put back")
	if _, err := compactor.GC(ctx, b, &compactor.GCPolicy{}, time.Now().Add(2*time.Hour)); err != nil {
		t.Fatal(err)
	}
	sameRows(t, before, digest(t, b), "a collection")
	// An operator who has no copy drops what is gone, and only that.
	if err := b.Delete(ctx, gone.Key); err != nil {
		t.Fatal(err)
	}
	dropped, err := compactor.DropMissing(ctx, b, nil)
	if err != nil || len(dropped) != 1 || dropped[0].Key != gone.Key {
		t.Fatalf("drop missing: %v %v", dropped, err)
	}
	if rows := len(digest(t, b)); rows != len(before)-500 {
		t.Fatalf("%d rows after dropping one generation of 500, want %d", rows, len(before)-500)
	}
}

// A compaction whose outputs GC took while it stalled, and whose writer
// died: the repair takes the outputs out and puts the sources back.
func TestRepairPutsACompactionsSourcesBack(t *testing.T) {
	b := rolloutsTable(t, "mem://", 0, 4, 10)
	before := digest(t, b)
	m, err := table.ReadLatest(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	plan := compactor.PlanCompaction(m, compactor.Policy{MinFragments: 2})
	if len(plan.Bins) != 1 {
		t.Fatalf("plan: %v", plan)
	}
	// The compaction's output, as it would write it.
	w, err := fragment.NewWriter(ctx, b, m.Schema())
	if err != nil {
		t.Fatal(err)
	}
	for rec, err := range table.NewSnapshot(b, m).Scan(ctx, table.ScanOptions{Fragments: plan.Bins[0].Fragments}) {
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Write(rec); err != nil {
			t.Fatal(err)
		}
	}
	out, err := w.Close()
	if err != nil {
		t.Fatal(err)
	}
	v := ghost(t, b, format.Transaction{Kind: format.KindRewrite, Removed: plan.Bins[0].Fragments, Added: []format.Fragment{out}}, []format.Fragment{out})
	rep, err := compactor.Repair(ctx, b, nil, nil)
	if err != nil || len(rep.Undone) != 1 || rep.Undone[0] != v {
		t.Fatalf("repair: %+v %v", rep, err)
	}
	// The sources come back as fresh copies: a collection that read only
	// versions before the repair, and so takes the original objects for
	// unreferenced (and old), deletes nothing the table needs.
	for _, id := range plan.Bins[0].Fragments {
		if err := b.Delete(ctx, m.Fragment(id).Key); err != nil {
			t.Fatal(err)
		}
	}
	sameRows(t, before, digest(t, b), "the repair")
}

// GC creates its boundary before it lists tags, and a tag that lands
// after the listing is refused (table.CreateTag): a tagged version is
// never collected.
func TestATagRacingACollectionIsKeptOrRefused(t *testing.T) {
	b := rolloutsTable(t, "mem://", 0, 12, 5) // v1..v13
	later := time.Now().Add(2 * time.Hour)
	res, err := compactor.GC(ctx, b, &compactor.GCPolicy{KeepVersions: 2, RetainFor: time.Hour, SafetyAge: time.Hour}, later)
	if err != nil || res.Boundary < 3 {
		t.Fatalf("gc: %+v %v", res, err)
	}
	// A tag for a version below the boundary, which this collection
	// deleted: refused, and not left behind.
	if err := table.CreateTag(ctx, b, "late", 3); err == nil {
		t.Fatal("a tag for a collected version was created")
	}
	if tags, _ := table.Tags(ctx, b); len(tags) != 0 {
		t.Fatalf("tags left: %+v", tags)
	}
	// Above the boundary: fine, and the next collection keeps it.
	v := res.Boundary + 1
	if err := table.CreateTag(ctx, b, "kept", v); err != nil {
		t.Fatal(err)
	}
	appendRollouts(t, b, 0, 100, 5, 5)
	if _, err := compactor.GC(ctx, b, &compactor.GCPolicy{KeepVersions: 1, RetainFor: time.Hour, SafetyAge: time.Hour}, later.Add(3*time.Hour)); err != nil {
		t.Fatal(err)
	}
	if _, err := table.Open(ctx, b, &table.OpenOptions{Tag: "kept"}); err != nil {
		t.Fatalf("tagged v%d: %v", v, err)
	}
}

// A compaction that meets a source whose data garbage collection took
// under a ghost commit repairs the table and plans again, rather than
// failing on every run (which would keep the collection that repairs from
// ever running in a job).
func TestCompactionRepairsASourceWhoseDataIsGone(t *testing.T) {
	b := rolloutsTable(t, "mem://", 0, 3, 10)
	rec := rollouts.Batch(testenv.Allocator(t), 42, 1, 0, 10)
	defer rec.Release()
	f, err := fragment.Write(ctx, b, rollouts.Schema, rec)
	if err != nil {
		t.Fatal(err)
	}
	ghost(t, b, format.Transaction{Kind: format.KindAppend, Added: []format.Fragment{f}}, []format.Fragment{f})
	res, err := compactor.Compact(ctx, b, &compactor.Policy{MinFragments: 2}, nil)
	if err != nil || res.Replans != 1 || res.FragmentsAfter != 1 {
		t.Fatalf("compaction: %+v %v", res, err)
	}
	if rows := len(digest(t, b)); rows != 30 {
		t.Fatalf("%d rows, want 30", rows)
	}
}

// A Delete stalled past GC, its deletion vector was collected as an
// orphan, its manifest landed anyway, and its writer died before it could
// write the vector again: the newest version references a vector that is
// gone, and nothing reads. The repair takes that delete back — it was
// never acknowledged — giving the fragment the vector it had before, so an
// earlier, acknowledged delete still holds. Without the orphan record the
// vector is reported missing and nothing is undone.
func TestRepairTakesBackADeleteWhoseVectorGCTook(t *testing.T) {
	for _, proof := range []bool{true, false} {
		b := rolloutsTable(t, "mem://", 0, 1, 10) // ids 0..9 in one fragment
		tb, err := commit.OpenTable(ctx, b, nil)
		if err != nil {
			t.Fatal(err)
		}
		first, err := expr.ParseFilter("id < 2")
		if err != nil {
			t.Fatal(err)
		}
		if _, n, err := tb.Delete(ctx, first); err != nil || n != 2 {
			t.Fatalf("first delete: %d %v", n, err)
		}
		acknowledged := digest(t, b)
		// The second delete's vector (ids 0..4, cumulative), written and
		// then collected as an orphan before its manifest landed.
		second, err := expr.ParseFilter("id < 5")
		if err != nil {
			t.Fatal(err)
		}
		snap, err := tb.Refresh(ctx)
		if err != nil {
			t.Fatal(err)
		}
		matches, err := snap.MatchingRows(ctx, second)
		if err != nil || len(matches) != 1 {
			t.Fatalf("matching rows: %v %v", matches, err)
		}
		var txn format.Transaction
		var vectors []format.Fragment
		for id, rows := range matches {
			key := format.DeletionKey(id, snap.Version()+1)
			if err := b.PutIfAbsent(ctx, key, format.EncodeDeletions(rows)); err != nil {
				t.Fatal(err)
			}
			txn = format.Transaction{Kind: format.KindDelete, Deletions: []format.FragmentDeletion{{FragmentID: id, Deletion: format.Deletion{Key: key, Count: int64(len(rows))}}}}
			vectors = append(vectors, format.Fragment{ID: id, Key: key})
		}
		var v uint64
		if proof {
			v = ghost(t, b, txn, vectors)
		} else {
			if err := b.Delete(ctx, vectors[0].Key); err != nil {
				t.Fatal(err)
			}
			cur, err := table.ReadLatest(ctx, b)
			if err != nil {
				t.Fatal(err)
			}
			txn.CommitID, txn.ReadVersion = format.NewID(), cur.Version
			if _, err := commit.Commit(ctx, b, cur, txn, nil); err != nil {
				t.Fatal(err)
			}
		}
		res, err := compactor.Repair(ctx, b, nil, nil)
		if !proof {
			var me *format.MissingDataError
			if !errors.As(err, &me) || !slices.Contains(me.Keys, vectors[0].Key) || len(res.Undone) != 0 {
				t.Fatalf("without proof: %+v %v", res, err)
			}
			continue
		}
		if err != nil || !slices.Equal(res.Undone, []uint64{v}) {
			t.Fatalf("repair: %+v %v, want v%d undone", res, err, v)
		}
		sameRows(t, acknowledged, digest(t, b), "taking back the unacknowledged delete")
	}
}

// An upsert whose deletion vectors on two fragments garbage collection
// took (its writer stalled past the safety age and died after its
// manifest landed) is taken back once, for both: the second missing
// vector finds its upsert taken back already.
func TestRepairTakesBackOnceAnUpsertMissingTwoVectors(t *testing.T) {
	b := rolloutsTable(t, "mem://", 0, 2, 10) // two fragments of 10 rows
	acknowledged := digest(t, b)
	cur, err := table.ReadLatest(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	if len(cur.Fragments) != 2 {
		t.Fatalf("%d fragments, want 2", len(cur.Fragments))
	}
	txn := format.Transaction{Kind: format.KindUpsert}
	var vectors []format.Fragment
	for _, f := range cur.Fragments {
		key := format.DeletionKey(f.ID, cur.Version+1)
		if err := b.PutIfAbsent(ctx, key, format.EncodeDeletions([]uint32{0})); err != nil {
			t.Fatal(err)
		}
		txn.Deletions = append(txn.Deletions, format.FragmentDeletion{FragmentID: f.ID, Deletion: format.Deletion{Key: key, Count: 1}})
		vectors = append(vectors, format.Fragment{ID: f.ID, Key: key})
	}
	v := ghost(t, b, txn, vectors)
	res, err := compactor.Repair(ctx, b, nil, nil)
	if err != nil || !slices.Equal(res.Undone, []uint64{v}) {
		t.Fatalf("repair: %+v %v, want v%d undone once", res, err, v)
	}
	latest, err := table.ReadLatest(ctx, b)
	if err != nil || latest.Version != v+1 {
		t.Fatalf("the latest version is %v (%v), want v%d, the one taking back", latest.Version, err, v+1)
	}
	sameRows(t, acknowledged, digest(t, b), "taking back the unacknowledged upsert")
}

// A merge of a shard's upserts whose deletion vector garbage collection
// took (the merger stalled past the safety age and died after its manifest
// landed) is not taken back — its rows were acknowledged in the shard's
// WAL — but its vector is written again: the fragment's vector before the
// merge with the rows whose keys the merge's rows hold. The table reads
// again, one row per key.
func TestRepairWritesAgainAMergesVectorGCTook(t *testing.T) {
	b := rolloutsTable(t, "mem://", 0, 1, 10) // ids of rows 0..9 in one fragment
	tb, err := commit.OpenTable(ctx, b, nil)
	if err != nil {
		t.Fatal(err)
	}
	first, err := expr.ParseFilter("step < 1")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := tb.Delete(ctx, first); err != nil { // a vector before the merge's
		t.Fatal(err)
	}
	before := digest(t, b)
	s, err := walshard.Open(ctx, b, &walshard.Options{Shard: "grader"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	rec := rollouts.Batch(testenv.Allocator(t), 42, 0, 2, 3) // rows 2..4 again: their ids
	if err := s.Upsert(ctx, []string{"id"}, rec); err != nil {
		t.Fatal(err)
	}
	rec.Release()
	if err := s.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	merged := digest(t, b)
	m, err := table.ReadLatest(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	if m.Transaction.Kind != format.KindMerge || len(m.Transaction.Deletions) != 1 {
		t.Fatalf("the latest version is %s with %d vectors, want a merge of upserts with one", m.Transaction.Kind, len(m.Transaction.Deletions))
	}
	gone := m.Transaction.Deletions[0].Deletion.Key
	if err := b.Delete(ctx, gone); err != nil {
		t.Fatal(err)
	}
	snap, err := table.Open(ctx, b, nil)
	if err != nil {
		t.Fatal(err)
	}
	var readErr error
	for _, err := range snap.Scan(ctx, table.ScanOptions{}) {
		if err != nil {
			readErr = err
			break
		}
	}
	if readErr == nil {
		t.Fatal("the table reads without the merge's vector")
	}
	res, err := compactor.Repair(ctx, b, nil, nil)
	if err != nil || !slices.Equal(res.Rewritten, []string{gone}) || len(res.Undone) != 0 {
		t.Fatalf("repair: %+v %v, want %s written again", res, err, gone)
	}
	sameRows(t, merged, digest(t, b), "writing the merge's vector again")
	if len(merged) != len(before) {
		t.Fatalf("%d rows after the merge of upserts of present keys, %d before", len(merged), len(before))
	}
}

// A merge that dropped a copy of a named append (a retry another shard
// stored) by a deletion vector on the fragment it added, stalled past
// garbage collection's safety age and died before writing the collected
// vector again, leaves a version that references it: the repair writes it
// again from the merge's record of the names it dropped (the rows stored
// twice were acknowledged in the WALs, so nothing is taken back), and the
// table and its changes read each row once.
func TestRepairWritesAgainTheVectorOfAMergeThatDroppedANamedCopy(t *testing.T) {
	b := rolloutsTable(t, "mem://", 0, 1, 10)
	name := format.Idempotency{Producer: "client", Seq: 1}
	for _, shard := range []string{"a", "b"} {
		s, err := walshard.Open(ctx, b, &walshard.Options{Shard: shard})
		if err != nil {
			t.Fatal(err)
		}
		rec := rollouts.Batch(testenv.Allocator(t), 42, 7, 0, 4)
		if _, err := s.AppendOnce(ctx, name, rec); err != nil {
			t.Fatal(err)
		}
		rec.Release()
		if shard == "b" {
			more := rollouts.Batch(testenv.Allocator(t), 42, 8, 0, 3)
			if _, err := s.AppendOnce(ctx, format.Idempotency{Producer: "client", Seq: 2}, more); err != nil {
				t.Fatal(err)
			}
			more.Release()
		}
		if err := s.Drain(ctx); err != nil {
			t.Fatal(err)
		}
		s.Close()
	}
	m, err := table.ReadLatest(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	added := m.Transaction.Added
	if m.Transaction.Kind != format.KindMerge || len(added) != 1 || added[0].Deletion == nil {
		t.Fatalf("the latest version is %s adding %+v, want a merge that drops the copy by a vector", m.Transaction.Kind, added)
	}
	gone := added[0].Deletion.Key
	if err := b.Delete(ctx, gone); err != nil {
		t.Fatal(err)
	}
	res, err := compactor.Repair(ctx, b, nil, nil)
	if err != nil || !slices.Equal(res.Rewritten, []string{gone}) || len(res.Undone) != 0 {
		t.Fatalf("repair: %+v %v, want %s written again", res, err, gone)
	}
	if got := len(digest(t, b)); got != 10+4+3 {
		t.Fatalf("%d distinct rows after the repair, want 17", got)
	}
	inserted := map[int64]int{}
	for c, err := range changes.Changes(ctx, b, 0, 0, changes.ChangesOptions{Columns: []string{"id"}}) {
		if err != nil {
			t.Fatalf("changes after the repair: %v", err)
		}
		for _, id := range c.Rows.Column(0).(*array.Int64).Int64Values() {
			if c.Kind == changes.ChangeInsert {
				inserted[id]++
			}
		}
	}
	for id, n := range inserted {
		if n != 1 {
			t.Fatalf("changes insert row %d %d times", id, n)
		}
	}
	if len(inserted) != 17 {
		t.Fatalf("changes insert %d rows, want 17", len(inserted))
	}
}
