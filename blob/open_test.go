package blob_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/harness/testenv"
)

func TestOpenRejectsBadURLs(t *testing.T) {
	t.Chdir(t.TempDir())
	for _, u := range []string{"", "ftp://x/y", "s3:///prefix", "gs:///p", "mem://a/../../b", "file://",
		"s3:/bucket/t", "gs:bucket", "file:rel", "./t\nx", "s3://b/t\n"} {
		_, err := blob.Open(context.Background(), u)
		if !errors.Is(err, blob.ErrBadURL) {
			t.Errorf("Open(%q) = %v, want ErrBadURL", u, err)
		}
	}
	if entries, _ := os.ReadDir("."); len(entries) > 0 {
		t.Errorf("refused URLs made %d folders", len(entries))
	}
	// An unknown scheme names the ones Open takes.
	if _, err := blob.Open(context.Background(), "ftp://x"); err == nil || !strings.Contains(err.Error(), "want mem, file, s3 or gs") {
		t.Errorf("ftp://x: %v", err)
	}
}

func TestOpenFileForms(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	for _, u := range []string{"file://./rel", "./rel", "file://" + filepath.Join(dir, "rel")} {
		b, err := blob.Open(context.Background(), u)
		if err != nil {
			t.Fatalf("Open(%q): %v", u, err)
		}
		if err := b.PutIfAbsent(context.Background(), "k/"+strings.ReplaceAll(strings.ReplaceAll(u, "/", "_"), ":", "_"), []byte("x")); err != nil {
			t.Fatalf("%s: %v", u, err)
		}
	}
	entries, err := os.ReadDir(filepath.Join(dir, "rel", "k"))
	if err != nil || len(entries) != 3 {
		t.Fatalf("the three URL forms should share one folder: %v, %v", entries, err)
	}
}

func TestOpenMinIOMissingBucketIsClear(t *testing.T) {
	srv := testenv.MinIO(t)
	u := strings.Replace(srv.URL(t), "s3://"+srv.Bucket+"/", "s3://no-such-bucket-strata/", 1)
	_, err := blob.Open(context.Background(), u)
	if err == nil || !strings.Contains(err.Error(), "no-such-bucket-strata") {
		t.Fatalf("Open of a missing bucket: %v", err)
	}
}

func TestOpenMinIOWrongCredentialsIsPermanent(t *testing.T) {
	srv := testenv.MinIO(t)
	t.Setenv("AWS_SECRET_ACCESS_KEY", "wrong")
	_, err := blob.Open(context.Background(), srv.URL(t))
	if !errors.Is(err, blob.ErrPermanent) {
		t.Fatalf("Open with a wrong secret: %v, want ErrPermanent", err)
	}
}

func TestCountersCountRequests(t *testing.T) {
	b, err := blob.Open(context.Background(), "mem://")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := b.PutIfAbsent(ctx, "a", []byte("12345")); err != nil {
		t.Fatal(err)
	}
	if err := b.PutIfAbsent(ctx, "a", []byte("12345")); !errors.Is(err, blob.ErrExists) {
		t.Fatalf("the second create: %v, want ErrExists", err)
	}
	if _, err := b.Get(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if _, err := b.ListPage(ctx, "", "", 10); err != nil {
		t.Fatal(err)
	}
	st, ok := blob.StatsOf(b)
	if !ok {
		t.Fatal("Open's bucket has no counters")
	}
	want := blob.Stats{CondPutsWon: 1, CondPutsLost: 1, Gets: 1, Lists: 1, BytesIn: 5, BytesOut: 5}
	if st != want {
		t.Fatalf("stats %+v, want %+v", st, want)
	}
	if st.Requests() != 4 {
		t.Fatalf("Requests() = %d, want 4", st.Requests())
	}
}

// Reading a table that is not there leaves nothing behind; temporary
// files that dead writers left are removed when a bucket is opened.
func TestAFolderBucketCreatesNothingUntilWrittenAndSweepsStaleTemps(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "tables", "t")
	b, err := blob.Open(context.Background(), "file://"+dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Get(context.Background(), "_versions/x"); !errors.Is(err, blob.ErrNotFound) {
		t.Fatalf("get: %v", err)
	}
	if _, err := b.ListPage(context.Background(), "", "", 10); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("reading made %s: %v", dir, err)
	}
	if err := b.PutIfAbsent(context.Background(), "a/b", []byte("x")); err != nil {
		t.Fatal(err)
	}
	tmp := filepath.Join(dir, ".strata-tmp")
	stale, fresh := filepath.Join(tmp, "stale"), filepath.Join(tmp, "fresh")
	for _, p := range []string{stale, fresh} {
		if err := os.WriteFile(p, []byte("partial upload"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	old := time.Now().Add(-2 * blob.StaleTempAge)
	if err := os.Chtimes(stale, old, old); err != nil {
		t.Fatal(err)
	}
	if _, err := blob.Open(context.Background(), "file://"+dir); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(stale); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a stale temp file is still there: %v", err)
	}
	if _, err := os.Stat(fresh); err != nil {
		t.Fatalf("a fresh temp file (a write in progress) was removed: %v", err)
	}
}
