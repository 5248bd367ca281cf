package blob

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"syscall"
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

// A conditional create whose name was linked but whose folder did not
// sync is not a refusal: the object is there, and others may read it. It
// is reported retryable, so that a committer reads what is there (its
// own manifest) instead of taking the commit for failed and making it
// again.
func TestAFolderSyncFailingAfterTheLinkIsNotARefusal(t *testing.T) {
	b, err := OpenFile(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	real := syncDir
	defer func() { syncDir = real }()
	syncDir = func(op, key, dir string) error { return fileErr(op, key, syscall.EIO) }
	err = b.PutIfAbsent(context.Background(), "v/1", []byte("x"))
	if !errors.Is(err, ErrRetryable) {
		t.Fatalf("put-if-absent with a failing folder sync: %v, want ErrRetryable", err)
	}
	syncDir = real
	if got, err := b.Get(context.Background(), "v/1"); err != nil || string(got) != "x" {
		t.Fatalf("the object: %q, %v", got, err)
	}
}
