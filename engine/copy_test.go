package engine_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"testing"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/blob/fault"
	"github.com/stratadb/strata/engine"
	"github.com/stratadb/strata/table"
	"github.com/stratadb/strata/table/format"
)

// copySource is a copy of the golden altered table (every kind of
// object, a tag) with more versions on top.
func copySource(t *testing.T) (blob.Bucket, *engine.DB, string) {
	t.Helper()
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS(filepath.Join("testdata", "tables", goldenFormat, "evolved"))); err != nil {
		t.Fatal(err)
	}
	b, err := blob.Open(ctx, "file://"+dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	db, err := engine.Open(ctx, b, &engine.Options{Log: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	for i := range 8 {
		copyAppend(t, b, db, 2000+10*i)
	}
	return b, db, dir
}

func copyAppend(t *testing.T, b blob.Bucket, db *engine.DB, id int) {
	t.Helper()
	if _, err := db.Append(ctx, engine.AppendOptions{}, jsonRows(t, latestSchema(t, b), fmt.Sprintf(`{"id":%d,"worker":"w9"}`, id))...); err != nil {
		t.Fatal(err)
	}
}

func scanAt(t *testing.T, b blob.Bucket, v uint64) []string {
	t.Helper()
	s, err := table.Open(ctx, b, &table.OpenOptions{Version: v})
	if err != nil {
		t.Fatalf("version %d: %v", v, err)
	}
	return goldenRows(t, s.Scan(ctx, table.ScanOptions{}))
}

// sameVersions checks that every version the copy holds reads as the
// source's, and returns the copy's latest (0: none).
func sameVersions(t *testing.T, src, dst blob.Bucket) uint64 {
	t.Helper()
	last, err := table.LatestVersion(ctx, dst)
	if errors.Is(err, format.ErrNotFound) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	for v := uint64(1); v <= last; v++ {
		if a, b := scanAt(t, dst, v), scanAt(t, src, v); !slices.Equal(a, b) {
			t.Fatalf("the copy's version %d holds %d rows, the source's %d", v, len(a), len(b))
		}
	}
	return last
}

// A copy killed at many points is a table at every one of them, each of
// its versions the source's; run again it goes on, checking what the run
// before left rather than writing it again; then it copies only what is
// new, and says when there is nothing.
func TestCopyResumesAndGoesOn(t *testing.T) {
	src, db, _ := copySource(t)
	last, err := table.LatestVersion(ctx, src)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := blob.Open(ctx, "file://"+t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	// Killed as it creates its sixth manifest: that version's objects
	// are there, copied and checked, and its manifest not.
	atManifest := fault.OnOps(fault.OnKeys(regexp.MustCompile("^"+format.VersionsDir), fault.Nth(6, fault.Always(fault.Fault{Action: fault.Crash}))), fault.OpPutIfAbsent)
	if _, err := engine.Copy(ctx, src, fault.Wrap(raw, atManifest), engine.CopyOptions{}); !errors.Is(err, fault.ErrCrashed) {
		t.Fatalf("a copy killed at its sixth manifest: %v", err)
	}
	if have := sameVersions(t, src, raw); have != 5 {
		t.Fatalf("killed at its sixth manifest, the copy holds versions up to %d", have)
	}
	res, err := engine.Copy(ctx, src, fault.Wrap(raw, fault.CrashAfter(12)), engine.CopyOptions{})
	if !errors.Is(err, fault.ErrCrashed) {
		t.Fatalf("a copy killed after 12 requests: %v", err)
	}
	if res.Checked == 0 {
		t.Fatalf("the run after the kill checked no object the run before left: %+v", res)
	}
	for _, n := range []int64{3, 9, 14} {
		dst := fault.Wrap(raw, fault.CrashAfter(n))
		if _, err := engine.Copy(ctx, src, dst, engine.CopyOptions{Parallel: 2}); !errors.Is(err, fault.ErrCrashed) {
			t.Fatalf("a copy killed after %d requests: %v", n, err)
		}
		have := sameVersions(t, src, raw)
		t.Logf("killed after %d requests: the copy holds versions up to %d", n, have)
	}
	res, err = engine.Copy(ctx, src, raw, engine.CopyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if res.To != last || sameVersions(t, src, raw) != last || res.Tags != 1 {
		t.Fatalf("the copy run to its end: %+v, the source's latest %d", res, last)
	}
	if _, err := table.Open(ctx, raw, &table.OpenOptions{Tag: "before-alter"}); err != nil {
		t.Fatalf("the copied tag: %v", err)
	}
	// What is new, and only that.
	copyAppend(t, src, db, 5000)
	copyAppend(t, src, db, 5001)
	res, err = engine.Copy(ctx, src, raw, engine.CopyOptions{})
	if err != nil || res.Versions != 2 || res.Objects != 2 || res.To != last+2 || sameVersions(t, src, raw) != last+2 {
		t.Fatalf("the incremental copy: %+v, %v", res, err)
	}
	if res, err := engine.Copy(ctx, src, raw, engine.CopyOptions{}); err != nil || !res.UpToDate {
		t.Fatalf("a copy with nothing new: %+v, %v", res, err)
	}
	// A copy written to since is not the source's: refused.
	cdb, err := engine.Open(ctx, raw, &engine.Options{Log: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer cdb.Close()
	copyAppend(t, raw, cdb, 6000)
	copyAppend(t, src, db, 6001)
	if _, err := engine.Copy(ctx, src, raw, engine.CopyOptions{}); !errors.Is(err, engine.ErrCopyDiverged) {
		t.Fatalf("a copy written to since: %v", err)
	}
	// From a version, into an empty folder.
	from, err := blob.Open(ctx, "file://"+t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer from.Close()
	res, err = engine.Copy(ctx, src, from, engine.CopyOptions{FromVersion: 12})
	if err != nil || res.From != 12 || res.Versions != int(last+3-11) {
		t.Fatalf("a copy from version 12: %+v, %v", res, err)
	}
	if a, b := scanAt(t, from, last+3), scanAt(t, src, last+3); !slices.Equal(a, b) {
		t.Fatalf("the copy from version 12 reads %d rows, the source %d", len(a), len(b))
	}
	if _, err := engine.Copy(ctx, src, from, engine.CopyOptions{FromVersion: 3}); !errors.Is(err, engine.ErrInvalidOptions) {
		t.Fatalf("--from-version on a copy that goes on: %v", err)
	}
}

func emptyFolder(t *testing.T) (blob.Bucket, string) {
	t.Helper()
	dir := t.TempDir()
	b, err := blob.Open(ctx, "file://"+dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b, dir
}

// What the source does between copies: a tag made, moved, deleted, a
// version collected past the copy's newest; a newer build's table; an
// object a killed run left damaged.
func TestCopyFollowsTheSourcesChanges(t *testing.T) {
	src, db, _ := copySource(t)
	dst, dstDir := emptyFolder(t)
	if _, err := engine.Copy(ctx, src, dst, engine.CopyOptions{}); err != nil {
		t.Fatal(err)
	}
	// A tag made on a version the copy holds arrives though nothing else
	// is new; a tag moved moves; one deleted stays, and is named.
	if err := table.CreateTag(ctx, src, "late", 12); err != nil {
		t.Fatal(err)
	}
	res, err := engine.Copy(ctx, src, dst, engine.CopyOptions{})
	if err != nil || !res.UpToDate || res.Tags != 1 {
		t.Fatalf("a tag made on a copied version: %+v, %v", res, err)
	}
	if err := table.DeleteTag(ctx, src, "late"); err != nil {
		t.Fatal(err)
	}
	if err := table.CreateTag(ctx, src, "late", 13); err != nil {
		t.Fatal(err)
	}
	if err := table.DeleteTag(ctx, src, "before-alter"); err != nil {
		t.Fatal(err)
	}
	res, err = engine.Copy(ctx, src, dst, engine.CopyOptions{})
	if tag, terr := table.ReadTag(ctx, dst, "late"); err != nil || terr != nil || tag.Version != 13 || !slices.Equal(res.TagsOnlyHere, []string{"before-alter"}) {
		t.Fatalf("a tag moved and one deleted: %+v, %v; the copy's late: %+v %v", res, err, tag, terr)
	}
	// An object a killed run left damaged is written again.
	copyAppend(t, src, db, 7000)
	latest, err := table.ReadLatest(ctx, src)
	if err != nil {
		t.Fatal(err)
	}
	key := latest.Fragments[len(latest.Fragments)-1].Key
	if err := os.WriteFile(filepath.Join(dstDir, filepath.FromSlash(key)), []byte("damaged"), 0o644); err != nil {
		t.Fatal(err)
	}
	if res, err := engine.Copy(ctx, src, dst, engine.CopyOptions{}); err != nil || res.Objects != 1 || sameVersions(t, src, dst) != latest.Version {
		t.Fatalf("a damaged object left by a killed run: %+v, %v", res, err)
	}
	// The source collected past the copy's newest: it cannot be checked.
	for i := range 3 {
		copyAppend(t, src, db, 7100+i)
	}
	if err := src.Delete(ctx, format.ManifestKey(latest.Version)); err != nil {
		t.Fatal(err)
	}
	if _, err := engine.Copy(ctx, src, dst, engine.CopyOptions{}); !errors.Is(err, engine.ErrCopyBehind) {
		t.Fatalf("the copy's newest collected from the source: %v", err)
	}
	// A copy ahead of the source is another table's history.
	ahead, _ := emptyFolder(t)
	if _, err := engine.Copy(ctx, src, ahead, engine.CopyOptions{}); err != nil {
		t.Fatal(err)
	}
	adb, err := engine.Open(ctx, ahead, &engine.Options{Log: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer adb.Close()
	copyAppend(t, ahead, adb, 8000)
	if _, err := engine.Copy(ctx, src, ahead, engine.CopyOptions{}); !errors.Is(err, engine.ErrCopyDiverged) {
		t.Fatalf("a copy ahead of the source: %v", err)
	}
}

// A newer build's table is not copied at all; a tagged version below a
// gap in the source's history is.
func TestCopyOfANewerTableWritesNothing(t *testing.T) {
	src, db, srcDir := copySource(t)
	if err := table.CreateTag(ctx, src, "old", 3); err != nil {
		t.Fatal(err)
	}
	for _, v := range []uint64{4, 5, 6} { // collected (a gap above the tagged v3)
		if err := src.Delete(ctx, format.ManifestKey(v)); err != nil {
			t.Fatal(err)
		}
	}
	dst, _ := emptyFolder(t)
	res, err := engine.Copy(ctx, src, dst, engine.CopyOptions{})
	if err != nil || res.From != 3 {
		t.Fatalf("a copy of a source with a tagged version below a gap: %+v, %v", res, err)
	}
	if a, b := scanAt(t, dst, 3), scanAt(t, src, 3); !slices.Equal(a, b) {
		t.Fatalf("the tagged v3 of the copy: %d rows, the source's %d", len(a), len(b))
	}
	copyAppend(t, src, db, 9000)
	latest, err := table.ReadLatest(ctx, src)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(srcDir, filepath.FromSlash(format.ManifestKey(latest.Version)))
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	binary.LittleEndian.PutUint16(data[10:], format.FormatMinor+1)
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	fresh, freshDir := emptyFolder(t)
	if _, err := engine.Copy(ctx, src, fresh, engine.CopyOptions{}); !errors.Is(err, format.ErrUnsupportedFormat) {
		t.Fatalf("a newer build's table: %v", err)
	}
	if entries, _ := os.ReadDir(freshDir); len(entries) != 0 {
		t.Fatalf("the refused copy wrote %d entries", len(entries))
	}
}
