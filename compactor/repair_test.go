package compactor_test

import (
	"testing"
	"time"

	"github.com/stratadb/strata/compactor"
	"github.com/stratadb/strata/table"
)

// A writer stalled past GC and died after its manifest landed: the newest
// version references a fragment that is gone, and nothing reads. The next
// collection undoes that commit first and deletes nothing more; the
// table reads again, with every other row.
func TestGCRepairsAVersionWhoseAppendLostItsData(t *testing.T) {
	b := rolloutsTable(t, "mem://", 0, 3, 10) // v2..v4, 30 rows
	m, err := table.ReadLatest(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	lost := m.Transaction.Added[0]
	if err := b.Delete(ctx, lost.Key); err != nil {
		t.Fatal(err)
	}
	if _, err := table.Open(ctx, b, nil); err != nil {
		t.Fatal(err)
	}
	res, err := compactor.GC(ctx, b, compactor.GCPolicy{}, time.Now().Add(2*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Repaired) != 1 || res.Repaired[0] != m.Version || len(res.ObjectsDeleted) != 0 {
		t.Fatalf("collection: %+v, want v%d repaired and nothing else deleted", res, m.Version)
	}
	s, err := table.Open(ctx, b, nil)
	if err != nil {
		t.Fatal(err)
	}
	if rows := len(digest(t, b)); rows != 20 {
		t.Fatalf("v%d reads %d rows, want the 20 of the two appends whose data is there", s.Version(), rows)
	}
	if _, err := compactor.Compact(ctx, b, compactor.Policy{MinFragments: 2}, nil); err != nil {
		t.Fatalf("compaction after the repair: %v", err)
	}
	undo := s.Manifest().Transaction
	for v := s.Version(); undo.Undoes == 0 && v > 1; v-- {
		u, err := table.ReadTransaction(ctx, b, v)
		if err != nil {
			t.Fatal(err)
		}
		undo = *u
	}
	if undo.Undoes != m.Version {
		t.Fatalf("no version undoes v%d", m.Version)
	}
}

// A compaction whose outputs GC took while it stalled, and whose writer
// died: the repair takes the outputs out and puts the sources back.
func TestRepairPutsACompactionsSourcesBack(t *testing.T) {
	b := rolloutsTable(t, "mem://", 0, 4, 10)
	before := digest(t, b)
	res, err := compactor.Compact(ctx, b, compactor.Policy{MinFragments: 2}, nil)
	if err != nil || res.Version == 0 {
		t.Fatalf("compaction: %+v %v", res, err)
	}
	m, _ := table.ReadManifest(ctx, b, res.Version)
	for _, f := range m.Transaction.Added {
		if err := b.Delete(ctx, f.Key); err != nil {
			t.Fatal(err)
		}
	}
	rep, err := compactor.Repair(ctx, b, nil, nil)
	if err != nil || len(rep.Undone) != 1 || rep.Undone[0] != res.Version {
		t.Fatalf("repair: %+v %v", rep, err)
	}
	// The sources come back as fresh copies: a collection that read only
	// versions before the repair, and so takes the original objects for
	// unreferenced (and old), deletes nothing the table needs.
	parent, _ := table.ReadManifest(ctx, b, m.Parent)
	for _, id := range m.Transaction.Removed {
		if err := b.Delete(ctx, parent.Fragment(id).Key); err != nil {
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
	res, err := compactor.GC(ctx, b, compactor.GCPolicy{KeepVersions: 2, RetainFor: time.Hour, SafetyAge: time.Hour}, later)
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
	if _, err := compactor.GC(ctx, b, compactor.GCPolicy{KeepVersions: 1, RetainFor: time.Hour, SafetyAge: time.Hour}, later.Add(3*time.Hour)); err != nil {
		t.Fatal(err)
	}
	if _, err := table.Open(ctx, b, &table.OpenOptions{Tag: "kept"}); err != nil {
		t.Fatalf("tagged v%d: %v", v, err)
	}
}

// A compaction that meets a source whose data is gone repairs the table
// and plans again, rather than failing on every run (which would keep the
// collection that repairs from ever running in a job).
func TestCompactionRepairsASourceWhoseDataIsGone(t *testing.T) {
	b := rolloutsTable(t, "mem://", 0, 3, 10)
	m, _ := table.ReadLatest(ctx, b)
	if err := b.Delete(ctx, m.Transaction.Added[0].Key); err != nil {
		t.Fatal(err)
	}
	res, err := compactor.Compact(ctx, b, compactor.Policy{MinFragments: 2}, nil)
	if err != nil || res.Replans != 1 || res.FragmentsAfter != 1 {
		t.Fatalf("compaction: %+v %v", res, err)
	}
	if rows := len(digest(t, b)); rows != 20 {
		t.Fatalf("%d rows, want 20", rows)
	}
}
