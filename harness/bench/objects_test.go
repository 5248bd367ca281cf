package bench

import (
	"context"
	"errors"
	"maps"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/table/format"
)

// Every object a fleet writes, named by the table's own layout, is
// counted under its kind: a layout that moves an object fails here, not
// silently in the cost model.
func TestObjectKinds(t *testing.T) {
	for _, c := range []struct {
		key  string
		want string
	}{
		{format.WALKey("w0001", 7), "wal"},
		{format.WALDir("w0001"), "wal"},
		{format.ShardStateKey("w0001", 3), "shard_state"},
		{format.GenerationKey("w0001", 4, 1, "ab12"), "generation"},
		{format.ShardEpochKey("w0001", 2), "epoch_claim"},
		{format.QuarantineKey("w0001", 9), "quarantine"},
		{format.FlushKey("w0001", 5), "flush"},
		{format.FlushDir("w0001"), "flush"},
		{format.FleetFlushDir, "flush"},
		{format.PendingKey("w0001", 4, 3), "announcement"},
		{format.FleetPendingDir, "announcement"},
		{format.MergedKey("w0001", 8), "merge_record"},
		{format.FleetShardsDir + "w0001", "registration"},
		{format.ManifestKey(12), "manifest"},
		{format.NewFragmentKey(), "fragment"},
		{"_compactor/lease/x.json", "compactor"},
		{format.IcebergDir + "metadata/v1.metadata.json", "iceberg"},
		{format.GCBoundaryKey(3), "gc"},
		{format.TagsDir + "release", "other"},
		{format.ShardDir("w0001") + "unknown/x", "other"},
	} {
		if got := objectKinds[objectKind(c.key)]; got != c.want {
			t.Errorf("%q counts as %q, want %q", c.key, got, c.want)
		}
	}
}

// A fleet's bucket counts each request once under its object, as the
// counted bucket underneath counts it by kind: the two add up exactly.
func TestFleetBucketCountsAsCounted(t *testing.T) {
	ctx := context.Background()
	b, err := blob.Open(ctx, "file://"+t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	var tally objectTally
	var conflicts atomic.Int64
	fb := &fleetBucket{Bucket: b, conflicts: &conflicts, tally: &tally}
	before, ok := blob.StatsOf(fb)
	if !ok {
		t.Fatal("no counted bucket under the fleet's")
	}
	wal, state, manifest := format.WALKey("w1", 1), format.ShardStateKey("w1", 1), format.ManifestKey(1)
	for _, k := range []string{wal, state, manifest} {
		if err := fb.PutIfAbsent(ctx, k, []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	if err := fb.PutIfAbsent(ctx, manifest, []byte("y")); !errors.Is(err, blob.ErrExists) {
		t.Fatalf("a second create of %s: %v", manifest, err)
	}
	if err := fb.Put(ctx, format.NewFragmentKey(), strings.NewReader("rows")); err != nil {
		t.Fatal(err)
	}
	if _, err := fb.Get(ctx, state); err != nil {
		t.Fatal(err)
	}
	r, err := fb.NewRangeReader(ctx, wal, 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	r.Close()
	if _, err := fb.Attributes(ctx, wal); err != nil {
		t.Fatal(err)
	}
	if _, err := fb.ListPage(ctx, format.WALDir("w1"), "", 0); err != nil {
		t.Fatal(err)
	}
	if _, err := fb.ListDir(ctx, format.ShardsDir, "", 0); err != nil {
		t.Fatal(err)
	}
	if err := blob.DeleteAll(ctx, fb, []string{wal, state}); err != nil {
		t.Fatal(err)
	}
	if err := fb.Delete(ctx, manifest); err != nil {
		t.Fatal(err)
	}
	st, _ := blob.StatsOf(fb)
	st = st.Sub(before)
	got := byObject(tally.snapshot(), tallyCounts{}, 1, 1)
	var sum float64
	for _, n := range got {
		sum += n
	}
	if want := float64(st.Requests()); sum != want {
		t.Fatalf("%g requests by object %v, %g counted (%+v)", sum, got, want, st)
	}
	want := map[string]float64{
		"wal/put": 1, "wal/get": 2, "wal/list": 1, "shard_state/put": 1, "shard_state/get": 1,
		"manifest/put": 2, "manifest/delete": 1, "fragment/put": 1, "other/list": 1, "mixed/delete": 1,
	}
	if !maps.Equal(got, want) {
		t.Fatalf("by object %v, want %v", got, want)
	}
	if conflicts.Load() != 1 {
		t.Fatalf("%d lost manifest creates counted, want 1", conflicts.Load())
	}
}
