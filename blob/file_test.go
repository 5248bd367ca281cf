package blob

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// A process that keeps a folder bucket open for days (a server, the Job in
// interval mode) still removes the temporary files that killed writers
// leave, once they are StaleTempAge old.
func TestALongLivedFileBucketRemovesStaleTempFiles(t *testing.T) {
	dir := t.TempDir()
	b, err := OpenFile(dir)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := b.PutIfAbsent(ctx, "a/1", []byte("x")); err != nil {
		t.Fatal(err)
	}
	stale := filepath.Join(dir, tmpDir, "left-by-a-killed-writer")
	if err := os.WriteFile(stale, []byte("partial"), 0o644); err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-2 * StaleTempAge)
	if err := os.Chtimes(stale, old, old); err != nil {
		t.Fatal(err)
	}
	if err := b.PutIfAbsent(ctx, "a/2", []byte("x")); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(stale); err != nil {
		t.Fatalf("swept again within StaleTempAge of opening: %v", err)
	}
	// StaleTempAge later:
	fb := b.(*fileBucket)
	fb.sweptAt.Store(fb.sweptAt.Load() - int64(StaleTempAge) - 1)
	if err := b.PutIfAbsent(ctx, "a/3", []byte("x")); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(stale); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a stale temp file outlived a day of writes: %v", err)
	}
}
