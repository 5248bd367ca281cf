package commit_test

import (
	"errors"
	"testing"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/commit"
	"github.com/stratadb/strata/table"
	"github.com/stratadb/strata/table/format"
	"github.com/stratadb/strata/table/fragment"
)

// A writer stalls past a garbage collection that deleted the version it is
// about to create. Its conditional create succeeds (the slot is free
// again), but the GC boundary shows the version is dead: the commit must
// not be acknowledged there, and the resurrected manifest must go.
func TestStalledWriterCannotResurrectACollectedVersion(t *testing.T) {
	b := open(t, "mem://")
	createIDTable(t, b)
	stale, err := table.ReadManifest(ctx, b, 1)
	if err != nil {
		t.Fatal(err)
	}
	h, err := commit.OpenTable(ctx, b, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 4 {
		rec := idBatch(int64(i))
		if _, err := h.Append(ctx, rec); err != nil {
			t.Fatal(err)
		}
		rec.Release()
	}
	// GC: the boundary first, then versions 1–3 go.
	if err := b.PutIfAbsent(ctx, format.GCBoundaryKey(3), nil); err != nil {
		t.Fatal(err)
	}
	for v := uint64(1); v <= 3; v++ {
		if err := b.Delete(ctx, format.ManifestKey(v)); err != nil {
			t.Fatal(err)
		}
	}
	rec := idBatch(99)
	defer rec.Release()
	frag, err := fragment.Write(ctx, b, idSchema, rec)
	if err != nil {
		t.Fatal(err)
	}
	txn := format.Transaction{Kind: format.KindAppend, Added: []format.Fragment{frag}}
	// StallCheck of 1ns: every commit counts as stalled, so the loop checks.
	_, err = commit.Commit(ctx, b, stale, txn, &commit.Options{StallCheck: 1})
	if !commit.IsRetryableConflict(err) {
		t.Fatalf("stale commit: %v, want a retryable conflict", err)
	}
	if _, err := b.Get(ctx, format.ManifestKey(2)); !errors.Is(err, blob.ErrNotFound) {
		t.Fatalf("the resurrected v2 manifest is still there: %v", err)
	}
	// Re-planned on the latest version, the same data commits at v6.
	res, err := commit.Commit(ctx, b, nil, txn, &commit.Options{StallCheck: 1})
	if err != nil || res.Version != 6 {
		t.Fatalf("re-planned commit: v%d, %v", res.Version, err)
	}
	s, err := table.Open(ctx, b, nil)
	if err != nil {
		t.Fatal(err)
	}
	if s.Manifest().Rows() != 5 {
		t.Fatalf("rows %d, want 5", s.Manifest().Rows())
	}
}
