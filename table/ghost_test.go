package table_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/table"
	"github.com/stratadb/strata/table/format"
)

// A version read by number whose manifest was created after a GC boundary
// covering it is a ghost — a writer stalled past the collection created
// it again, and died before deleting it — and reads as collected, not as
// what it holds; a version kept below the boundary (created before it)
// reads as itself. Before, the ghost read as the version a reader had
// pinned, with other rows (simulation seed 31138).
func TestAGhostOfACollectedVersionReadsAsCollected(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	b, err := blob.Open(ctx, "file://"+dir)
	if err != nil {
		t.Fatal(err)
	}
	_, tb := openRolloutsTable(t, b)
	for i := range 4 {
		appendRollouts(t, tb, 1, int64(i*10), 10) // v2..v5
	}
	ghost, err := b.Get(ctx, format.ManifestKey(2))
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Delete(ctx, format.ManifestKey(2)); err != nil { // collected
		t.Fatal(err)
	}
	if err := b.PutIfAbsent(ctx, format.GCBoundaryKey(3), nil); err != nil {
		t.Fatal(err)
	}
	then := time.Now().Add(-time.Minute) // v3, kept (tagged), is older than the boundary
	for i, k := range []string{format.ManifestKey(3), format.GCBoundaryKey(3)} {
		at := then.Add(time.Duration(i) * 30 * time.Second)
		if err := os.Chtimes(filepath.Join(dir, filepath.FromSlash(k)), at, at); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.PutIfAbsent(ctx, format.ManifestKey(2), ghost); err != nil { // the stalled writer's create
		t.Fatal(err)
	}
	if _, err := table.Open(ctx, b, &table.OpenOptions{Version: 2}); !errors.Is(err, format.ErrVersionNotFound) {
		t.Fatalf("reading the ghost of v2: %v, want ErrVersionNotFound", err)
	}
	for _, v := range []uint64{3, 5} {
		s, err := table.Open(ctx, b, &table.OpenOptions{Version: v})
		if err != nil || s.Version() != v {
			t.Fatalf("reading v%d: %v", v, err)
		}
	}
}

// A tagged version below a boundary whose manifest looks created after
// it (a copy reset the times) is no ghost: no tag is made at or below a
// boundary, and collections keep tagged versions. It reads as itself.
func TestATaggedVersionIsNoGhostWhateverItsTime(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	b, err := blob.Open(ctx, "file://"+dir)
	if err != nil {
		t.Fatal(err)
	}
	_, tb := openRolloutsTable(t, b)
	for i := range 4 {
		appendRollouts(t, tb, 1, int64(i*10), 10) // v2..v5
	}
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
	if s, err := table.Open(ctx, b, &table.OpenOptions{Tag: "keep"}); err != nil || s.Version() != 2 {
		t.Fatalf("reading the tagged v2: %v", err)
	}
}
