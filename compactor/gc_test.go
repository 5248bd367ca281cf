package compactor_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"testing"
	"time"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/blob/fault"
	"github.com/stratadb/strata/commit"
	"github.com/stratadb/strata/compactor"
	"github.com/stratadb/strata/harness/rollouts"
	"github.com/stratadb/strata/harness/testenv"
	"github.com/stratadb/strata/table"
	"github.com/stratadb/strata/table/format"
	"github.com/stratadb/strata/table/fragment"
)

func exists(t *testing.T, b blob.Bucket, key string) bool {
	t.Helper()
	_, err := b.Attributes(ctx, key)
	if err != nil && !errors.Is(err, blob.ErrNotFound) {
		t.Fatal(err)
	}
	return err == nil
}

// GC removes only what it may: old versions but the newest, the tagged and
// the young ones; unreferenced objects only once older than the safety
// age — an uncommitted upload of a slow writer survives — and every version
// kept still reads.
func TestGCRemovesOnlyWhatItMay(t *testing.T) {
	b := rolloutsTable(t, "mem://", 0, 20, 10) // versions 1..21
	if err := table.CreateTag(ctx, b, "keep-me", 3); err != nil {
		t.Fatal(err)
	}
	if _, err := compactor.Compact(ctx, b, &compactor.Policy{}, nil); err != nil { // v22
		t.Fatal(err)
	}
	// A slow writer's fragment: uploaded, not yet committed.
	rec := rollouts.Batch(testenv.Allocator(t), 42, 9, 0, 5)
	defer rec.Release()
	pending, err := fragment.Write(ctx, b, rollouts.Schema, rec)
	if err != nil {
		t.Fatal(err)
	}
	v3, err := table.Open(ctx, b, &table.OpenOptions{Version: 3})
	if err != nil {
		t.Fatal(err)
	}
	v3Frags := v3.Manifest().Fragments

	// A dry run an hour and a half from now: lists, deletes nothing.
	later := time.Now().Add(90 * time.Minute)
	p := compactor.GCPolicy{KeepVersions: 5, RetainFor: time.Hour, SafetyAge: 2 * time.Hour}
	dry, err := compactor.GC(ctx, b, &compactor.GCPolicy{KeepVersions: 5, RetainFor: time.Hour, SafetyAge: 2 * time.Hour, DryRun: true}, later)
	if err != nil || len(dry.VersionsDeleted) == 0 {
		t.Fatalf("dry run: %+v, %v", dry, err)
	}
	if !exists(t, b, format.ManifestKey(1)) {
		t.Fatal("a dry run deleted a manifest")
	}

	res, err := compactor.GC(ctx, b, &p, later)
	if err != nil {
		t.Fatal(err)
	}
	// Versions 18..22 are the newest five; 3 is tagged; 1..17 but 3 go.
	if res.Boundary != 17 || len(res.VersionsDeleted) != 16 || res.VersionsKept != 6 {
		t.Fatalf("GC: boundary %d, deleted %v, kept %d", res.Boundary, res.VersionsDeleted, res.VersionsKept)
	}
	if len(res.ObjectsDeleted) != 0 {
		t.Fatalf("objects younger than the safety age were deleted: %v", res.ObjectsDeleted)
	}
	if !exists(t, b, format.GCBoundaryKey(17)) {
		t.Fatal("no GC boundary was written")
	}
	for _, v := range []uint64{3, 18, 22} {
		s, err := table.Open(ctx, b, &table.OpenOptions{Version: v})
		if err != nil {
			t.Fatalf("kept version %d: %v", v, err)
		}
		n := 0
		for rec, err := range s.Scan(ctx, table.ScanOptions{}) {
			if err != nil {
				t.Fatalf("scan of kept version %d: %v", v, err)
			}
			n += int(rec.NumRows())
		}
		if int64(n) != s.Manifest().Rows() {
			t.Fatalf("version %d scans %d rows, holds %d", v, n, s.Manifest().Rows())
		}
	}
	if _, err := table.Open(ctx, b, &table.OpenOptions{Version: 10}); !errors.Is(err, format.ErrVersionNotFound) {
		t.Fatalf("collected version 10: %v", err)
	}

	// Three hours on, keeping only the newest version (and the tagged
	// one): the compacted-away fragments that only collected versions used
	// go; those of the tagged version 3 stay; the slow writer's upload is
	// old enough now, and unreferenced, so it goes too.
	p.KeepVersions = 1
	res, err = compactor.GC(ctx, b, &p, time.Now().Add(3*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(res.ObjectsDeleted, pending.Key) {
		t.Fatalf("old unreferenced upload %s survived: %v", pending.Key, res.ObjectsDeleted)
	}
	for _, f := range v3Frags {
		if !exists(t, b, f.Key) {
			t.Fatalf("fragment %s of tagged version 3 was deleted", f.Key)
		}
	}
	if len(res.ObjectsDeleted) != 20-2+1 { // 20 appended fragments, minus the 2 of v3, plus the upload
		t.Fatalf("deleted %d objects: %v", len(res.ObjectsDeleted), res.ObjectsDeleted)
	}
	s, err := table.Open(ctx, b, nil)
	if err != nil {
		t.Fatal(err)
	}
	if s.Manifest().Rows() != 200 {
		t.Fatalf("latest holds %d rows", s.Manifest().Rows())
	}
}

func TestGCKeepsUploadsOfASlowWriterThatThenCommits(t *testing.T) {
	b := rolloutsTable(t, "mem://", 0, 3, 10)
	rec := rollouts.Batch(testenv.Allocator(t), 42, 5, 0, 7)
	defer rec.Release()
	frag, err := fragment.Write(ctx, b, rollouts.Schema, rec)
	if err != nil {
		t.Fatal(err)
	}
	// GC runs while the writer is between its upload and its commit.
	if _, err := compactor.GC(ctx, b, &compactor.GCPolicy{KeepVersions: 1}, time.Now().Add(30*time.Minute)); err != nil {
		t.Fatal(err)
	}
	if _, err := commit.Commit(ctx, b, nil, format.Transaction{Kind: format.KindAppend, Added: []format.Fragment{frag}}, nil); err != nil {
		t.Fatal(err)
	}
	s, err := table.Open(ctx, b, nil)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for rec, err := range s.Scan(ctx, table.ScanOptions{}) {
		if err != nil {
			t.Fatalf("scan after the slow commit: %v", err)
		}
		n += int(rec.NumRows())
	}
	if n != 37 {
		t.Fatalf("%d rows, want 37", n)
	}
}

// A collection cut short by an error deletes versions oldest first, so the
// versions left have no gap below the newest: a writer that takes an old
// version for the latest finds the next one taken, not a slot to fill.
func TestGCDeletesVersionsOldestFirst(t *testing.T) {
	under := rolloutsTable(t, "mem://", 0, 12, 5) // v1..v13
	failAt := format.ManifestKey(6)
	f := fault.Wrap(under, fault.OnOps(fault.OnKeys(regexp.MustCompile("^"+regexp.QuoteMeta(failAt)+"$"),
		fault.Always(fault.Fault{Action: fault.Fail})), fault.OpDelete))
	_, err := compactor.GC(ctx, f, &compactor.GCPolicy{KeepVersions: 2, RetainFor: time.Hour, SafetyAge: time.Hour}, time.Now().Add(2*time.Hour))
	if err == nil {
		t.Fatal("the collection did not meet the injected error")
	}
	for v := uint64(1); v <= 13; v++ {
		if got, want := exists(t, under, format.ManifestKey(v)), v >= 6; got != want {
			t.Errorf("v%d present %v, want %v (versions below the failed delete gone, the rest kept)", v, got, want)
		}
	}
}

// A ghost — a collected version a stalled writer created again, then died
// before taking it away — was created after a newer version; GC removes
// it and keeps every real version.
func TestGCRemovesAGhostVersion(t *testing.T) {
	b := rolloutsTable(t, "mem://", 0, 4, 5) // v1..v5
	ghost, err := b.Get(ctx, format.ManifestKey(3))
	if err != nil {
		t.Fatal(err)
	}
	// A collection through v3 took it (its boundary stays).
	if err := b.PutIfAbsent(ctx, format.GCBoundaryKey(3), nil); err != nil {
		t.Fatal(err)
	}
	if err := b.Delete(ctx, format.ManifestKey(3)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(10 * time.Millisecond) // store clocks have a resolution
	if err := b.PutIfAbsent(ctx, format.ManifestKey(3), ghost); err != nil {
		t.Fatal(err)
	}
	res, err := compactor.GC(ctx, b, &compactor.GCPolicy{}, time.Now())
	if err != nil || !slices.Equal(res.GhostsDeleted, []uint64{3}) {
		t.Fatalf("gc: %+v %v, want v3 removed as a ghost", res, err)
	}
	for v := uint64(1); v <= 5; v++ {
		if got := exists(t, b, format.ManifestKey(v)); got != (v != 3) {
			t.Errorf("v%d present: %v", v, got)
		}
	}
}

// A key index built again replaces the old one in the manifest; once no
// retained version references the old object, GC collects it and keeps the
// live one.
func TestGCCollectsAReplacedIndexAndKeepsTheLiveOne(t *testing.T) {
	b := rolloutsTable(t, "mem://", 0, 4, 10)
	tb, err := commit.OpenTable(ctx, b, nil)
	if err != nil {
		t.Fatal(err)
	}
	first, err := tb.CreateIndex(ctx, "id")
	if err != nil {
		t.Fatal(err)
	}
	appendRollouts(t, b, 0, 4, 2, 10)
	second, err := tb.CreateIndex(ctx, "id")
	if err != nil {
		t.Fatal(err)
	}
	oldKey, liveKey := first.Manifest.Transaction.Index.Key, second.Manifest.Transaction.Index.Key
	if oldKey == liveKey || !exists(t, b, oldKey) {
		t.Fatalf("index objects %q, %q", oldKey, liveKey)
	}
	// Right away the old one is young: kept (the safety age).
	if _, err := compactor.GC(ctx, b, &compactor.GCPolicy{KeepVersions: 1, RetainFor: time.Hour, SafetyAge: time.Hour}, time.Now()); err != nil {
		t.Fatal(err)
	}
	if !exists(t, b, oldKey) {
		t.Fatal("a young index object was collected")
	}
	res, err := compactor.GC(ctx, b, &compactor.GCPolicy{KeepVersions: 1, RetainFor: time.Hour, SafetyAge: time.Hour}, time.Now().Add(2*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if exists(t, b, oldKey) || !exists(t, b, liveKey) || !slices.Contains(res.ObjectsDeleted, oldKey) {
		t.Fatalf("after GC: old index there %v, live index there %v; deleted %v", exists(t, b, oldKey), exists(t, b, liveKey), res.ObjectsDeleted)
	}
	got, _ := take(t, b, 5, 45)
	checkRows(t, got, 5, 45)
}

// Retention and the safety age never go below MinRetain, whatever the
// policy says: a collection right after writes, asked to keep nothing for
// no time, deletes neither the young versions nor a young upload that a
// slow writer is about to commit.
func TestGCNeverGoesBelowItsFloor(t *testing.T) {
	b := rolloutsTable(t, "mem://", 0, 6, 10) // versions 1..7, just written
	rec := rollouts.Batch(testenv.Allocator(t), 42, 9, 0, 5)
	defer rec.Release()
	pending, err := fragment.Write(ctx, b, rollouts.Schema, rec)
	if err != nil {
		t.Fatal(err)
	}
	zero := compactor.GCPolicy{KeepVersions: 1, RetainFor: time.Nanosecond, SafetyAge: time.Nanosecond}
	res, err := compactor.GC(ctx, b, &zero, time.Now().Add(compactor.MinRetain-time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if len(res.VersionsDeleted) != 0 || len(res.ObjectsDeleted) != 0 || !exists(t, b, pending.Key) || !exists(t, b, format.ManifestKey(1)) {
		t.Fatalf("within the floor GC deleted versions %v and objects %v", res.VersionsDeleted, res.ObjectsDeleted)
	}
	// Past the floor the same policy collects.
	res, err = compactor.GC(ctx, b, &zero, time.Now().Add(compactor.MinRetain+time.Minute))
	if err != nil || len(res.VersionsDeleted) == 0 || exists(t, b, pending.Key) {
		t.Fatalf("past the floor: %+v, %v", res, err)
	}
}

// coarseHead is a store whose HEAD dates objects coarsely (S3's and
// MinIO's Last-Modified: to the second; here to the minute) and whose
// listing does not show hidden yet (a version created after the listing).
type coarseHead struct {
	blob.Bucket
	hidden string
	shown  *bool // after the first listing that hid it
}

func (c coarseHead) Attributes(ctx context.Context, key string) (blob.Attributes, error) {
	a, err := c.Bucket.Attributes(ctx, key)
	a.ModTime = a.ModTime.Truncate(time.Minute)
	return a, err
}

func (c coarseHead) ListPage(ctx context.Context, prefix, token string, n int) (blob.Page, error) {
	p, err := c.Bucket.ListPage(ctx, prefix, token, n)
	if prefix == format.VersionsDir && n != 1 && !*c.shown {
		p.Objects = slices.DeleteFunc(p.Objects, func(o blob.ObjectInfo) bool { return o.Key == c.hidden })
		*c.shown = true
	}
	return p, err
}

// A version the listing does not show yet, found by name and dated by a
// HEAD to the second, makes no version listed before it look like a ghost:
// every version stays (it deleted the newest listed one).
func TestGCTakesNoVersionForAGhostByACoarseClock(t *testing.T) {
	b := rolloutsTable(t, "mem://", 0, 4, 5) // v1..v5
	res, err := compactor.GC(ctx, coarseHead{Bucket: b, hidden: format.ManifestKey(5), shown: new(bool)}, &compactor.GCPolicy{}, time.Now())
	if err != nil || len(res.GhostsDeleted) != 0 {
		t.Fatalf("gc: %+v %v, want no ghost", res, err)
	}
	for v := uint64(1); v <= 5; v++ {
		if !exists(t, b, format.ManifestKey(v)) {
			t.Errorf("v%d was deleted", v)
		}
	}
}

// The objects a collection deletes go many a request where the store
// deletes many at once; versions still go one at a time, oldest first.
func TestGCDeletesObjectsInBatches(t *testing.T) {
	b := rolloutsTable(t, "file://"+t.TempDir(), 0, 30, 4) // versions 1..31, 30 fragments
	if _, err := compactor.Compact(ctx, b, &compactor.Policy{}, nil); err != nil {
		t.Fatal(err)
	}
	before, _ := blob.StatsOf(b)
	res, err := compactor.GC(ctx, b, &compactor.GCPolicy{KeepVersions: 1, RetainFor: time.Minute, SafetyAge: time.Minute}, time.Now().Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	after, _ := blob.StatsOf(b)
	if len(res.ObjectsDeleted) < 30 {
		t.Fatalf("the collection deleted %d objects, want the 30 compacted fragments at least", len(res.ObjectsDeleted))
	}
	// Each version, then one batch of objects, then the store-clock
	// probe's and the orphan records' own.
	if d, most := after.Sub(before).Deletes, int64(len(res.VersionsDeleted))+4; d > most {
		t.Fatalf("%d delete requests for %d versions and %d objects, want at most %d", d, len(res.VersionsDeleted), len(res.ObjectsDeleted), most)
	}
	n := 0
	snap, err := table.Open(ctx, b, nil)
	if err != nil {
		t.Fatal(err)
	}
	for rec, err := range snap.Scan(ctx, table.ScanOptions{}) {
		if err != nil {
			t.Fatal(err)
		}
		n += int(rec.NumRows())
	}
	if n != 120 {
		t.Fatalf("%d rows after the collection, want 120", n)
	}
}

// A table copied by a tool that does not keep modification times (cp, a
// sync to another bucket writing the newest manifest first) has its
// versions' manifests written in the opposite order; with no collection's
// boundary above them none is a ghost, and none goes.
func TestGCTakesNoVersionOfACopyForAGhost(t *testing.T) {
	dir := t.TempDir()
	b := rolloutsTable(t, "file://"+dir, 0, 4, 5) // v1..v5
	for v := uint64(1); v <= 5; v++ {
		at := time.Now().Add(-time.Duration(v) * time.Minute) // older versions later
		if err := os.Chtimes(filepath.Join(dir, filepath.FromSlash(format.ManifestKey(v))), at, at); err != nil {
			t.Fatal(err)
		}
	}
	res, err := compactor.GC(ctx, b, &compactor.GCPolicy{KeepVersions: 10}, time.Now())
	if err != nil || len(res.GhostsDeleted) != 0 || len(res.VersionsDeleted) != 0 {
		t.Fatalf("gc of a copied table: %+v %v, want nothing deleted", res, err)
	}
	for v := uint64(1); v <= 5; v++ {
		if _, err := b.Attributes(ctx, format.ManifestKey(v)); err != nil {
			t.Errorf("v%d: %v", v, err)
		}
	}
}

// A tagged version is no ghost, whatever its manifest's modification
// time says: a collection kept it, and no tag is made at or below a
// boundary. (A copy that resets times makes an old tagged version look
// written after the newer ones.)
func TestGCTakesNoTaggedVersionForAGhost(t *testing.T) {
	dir := t.TempDir()
	b := rolloutsTable(t, "file://"+dir, 0, 4, 5) // v1..v5
	if err := table.CreateTag(ctx, b, "keep", 2); err != nil {
		t.Fatal(err)
	}
	if err := b.PutIfAbsent(ctx, format.GCBoundaryKey(3), nil); err != nil {
		t.Fatal(err)
	}
	later := time.Now().Add(time.Minute)
	if err := os.Chtimes(filepath.Join(dir, filepath.FromSlash(format.ManifestKey(2))), later, later); err != nil {
		t.Fatal(err)
	}
	res, err := compactor.GC(ctx, b, &compactor.GCPolicy{KeepVersions: 10}, time.Now())
	if err != nil || len(res.GhostsDeleted) != 0 {
		t.Fatalf("gc: %+v %v, want the tagged v2 kept", res, err)
	}
	if _, err := b.Attributes(ctx, format.ManifestKey(2)); err != nil {
		t.Fatalf("the tagged v2: %v", err)
	}
}
