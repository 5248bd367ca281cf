package commit_test

import (
	"errors"
	"maps"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/blob/fault"
	"github.com/stratadb/strata/commit"
	"github.com/stratadb/strata/compactor"
	"github.com/stratadb/strata/table"
	"github.com/stratadb/strata/table/changes"
	"github.com/stratadb/strata/table/expr"
	"github.com/stratadb/strata/table/format"
	"github.com/stratadb/strata/table/value"
)

// idsOf lists the ids version v holds, sorted.
func idsOf(t *testing.T, b blob.Bucket, v uint64) []int64 {
	t.Helper()
	m, err := table.ReadManifest(ctx, b, v)
	if err != nil {
		t.Fatal(err)
	}
	var ids []int64
	for rec, err := range table.NewSnapshot(b, m).Scan(ctx, table.ScanOptions{}) {
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, rec.Column(0).(*array.Int64).Int64Values()...)
	}
	slices.Sort(ids)
	return ids
}

// changed counts the rows version v changed, by kind.
func changed(t *testing.T, b blob.Bucket, v uint64) map[changes.ChangeKind][]int64 {
	t.Helper()
	out := map[changes.ChangeKind][]int64{}
	for c, err := range changes.Changes(ctx, b, v-1, v, changes.ChangesOptions{}) {
		if err != nil {
			t.Fatal(err)
		}
		out[c.Kind] = append(out[c.Kind], c.Rows.Column(0).(*array.Int64).Int64Values()...)
	}
	return out
}

// A restore commits a new version with an earlier version's rows — its
// objects and deletion vectors, nothing copied — and its changes are only
// what differs; an append planned before it and landing after is a
// conflict, not rows lost silently; a version garbage collection took
// cannot be restored; the tag that held the version while it worked is
// gone after.
func TestRestoreCommitsAnEarlierVersionsRows(t *testing.T) {
	b := open(t, "file://"+t.TempDir())
	createIDTable(t, b)
	tb, err := commit.OpenTable(ctx, b, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, ids := range [][]int64{{1, 2, 3}, {4, 5}} {
		rec := idBatch(ids...)
		if _, err := tb.Append(ctx, rec); err != nil {
			t.Fatal(err)
		}
		rec.Release()
	}
	if _, _, err := tb.Delete(ctx, expr.Eq("id", value.Int(2))); err != nil { // v4
		t.Fatal(err)
	}
	over := idBatch(9)
	defer over.Release()
	if _, err := tb.Overwrite(ctx, idSchema, over); err != nil { // v5
		t.Fatal(err)
	}
	stale, err := commit.OpenTable(ctx, b, nil) // at v5
	if err != nil {
		t.Fatal(err)
	}
	res, err := tb.Restore(ctx, 3) // v6
	if err != nil || res.Version != 6 {
		t.Fatalf("restore of v3: %+v %v", res, err)
	}
	if got := idsOf(t, b, 6); !slices.Equal(got, []int64{1, 2, 3, 4, 5}) {
		t.Fatalf("v6, restored from v3, holds %v", got)
	}
	if c := changed(t, b, 6); !slices.Equal(c[changes.ChangeDelete], []int64{9}) || len(c[changes.ChangeInsert]) != 5 {
		t.Fatalf("the changes of the restore of v3: %v", c)
	}
	if _, err := tb.Restore(ctx, 4); err != nil { // v7, with v4's deletion vector
		t.Fatal(err)
	}
	if got := idsOf(t, b, 7); !slices.Equal(got, []int64{1, 3, 4, 5}) {
		t.Fatalf("v7, restored from v4, holds %v", got)
	}
	// Its fragments are v4's objects: the only change is v4's delete.
	if c := changed(t, b, 7); !maps.EqualFunc(c, map[changes.ChangeKind][]int64{changes.ChangeDelete: {2}}, slices.Equal) {
		t.Fatalf("the changes of the restore of v4 over v6: %v", c)
	}
	m7, err := table.ReadManifest(ctx, b, 7)
	if err != nil {
		t.Fatal(err)
	}
	m4, err := table.ReadManifest(ctx, b, 4)
	if err != nil {
		t.Fatal(err)
	}
	for i := range m7.Fragments {
		if m7.Fragments[i].Key != m4.Fragments[i].Key || m7.Transaction.Restores != 4 {
			t.Fatalf("v7's fragment %d is %s, v4's %s (restores %d)", i, m7.Fragments[i].Key, m4.Fragments[i].Key, m7.Transaction.Restores)
		}
	}
	// An append planned on v5 lands after the restores: a conflict.
	late := idBatch(100)
	defer late.Release()
	var conflict *commit.ConflictError
	if _, err := stale.Append(ctx, late); !errors.As(err, &conflict) {
		t.Fatalf("an append planned before a restore and landing after: %v, want a *ConflictError", err)
	}
	if tags, err := table.Tags(ctx, b); err != nil || len(tags) != 0 {
		t.Fatalf("tags after the restores: %v %v", tags, err)
	}
	// Collected: v1…v6 go (one version kept, hours later).
	if _, err := compactor.GC(ctx, b, &compactor.GCPolicy{KeepVersions: 1}, time.Now().Add(3*time.Hour)); err != nil {
		t.Fatal(err)
	}
	if _, err := tb.Restore(ctx, 3); !errors.Is(err, format.ErrVersionNotFound) {
		t.Fatalf("restore of a collected version: %v", err)
	}
	if tags, err := table.Tags(ctx, b); err != nil || len(tags) != 0 {
		t.Fatalf("tags after a refused restore: %v %v", tags, err)
	}
}

// The restore's cell of the conflict matrix, the other way round: an
// append that lands while a restore is committing (after the restore read
// the latest version, before its manifest goes in) does not stop it. The
// restore, an Overwrite, is retried on top and lands with the restored
// version's rows; the append's rows, acknowledged, are then gone from the
// table as an overwrite's are, and its changes say so: a delete of them.
func TestAnAppendRacingARestoreIsOverwrittenVisibly(t *testing.T) {
	under := open(t, "mem://")
	createIDTable(t, under)
	appender, err := commit.OpenTable(ctx, under, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, ids := range [][]int64{{1, 2}, {3}} { // v2, v3
		rec := idBatch(ids...)
		if _, err := appender.Append(ctx, rec); err != nil {
			t.Fatal(err)
		}
		rec.Release()
	}
	// At the restore's first create of a manifest, the append lands.
	var raced atomic.Bool
	racing := fault.Wrap(under, fault.InjectorFunc(func(op fault.Op, key string) fault.Fault {
		if op == fault.OpPutIfAbsent && strings.HasPrefix(key, "_versions/") && raced.CompareAndSwap(false, true) {
			rec := idBatch(7)
			defer rec.Release()
			if res, err := appender.Append(ctx, rec); err != nil || res.Version != 4 {
				t.Errorf("the racing append: %+v %v", res, err)
			}
		}
		return fault.Fault{}
	}))
	restorer, err := commit.OpenTable(ctx, racing, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := restorer.Restore(ctx, 2)
	if err != nil || res.Version != 5 || !raced.Load() {
		t.Fatalf("a restore of v2 with an append landing under it: %+v %v (raced %v)", res, err, raced.Load())
	}
	if got := idsOf(t, under, 4); !slices.Equal(got, []int64{1, 2, 3, 7}) {
		t.Fatalf("v4, the racing append, holds %v", got)
	}
	if got := idsOf(t, under, 5); !slices.Equal(got, []int64{1, 2}) {
		t.Fatalf("v5, the restore of v2, holds %v", got)
	}
	c := changed(t, under, 5)
	slices.Sort(c[changes.ChangeDelete])
	if !slices.Equal(c[changes.ChangeDelete], []int64{3, 7}) || len(c[changes.ChangeInsert]) != 0 {
		t.Fatalf("the changes of the restore: %v, want the deletes of 3 and 7", c)
	}
}
