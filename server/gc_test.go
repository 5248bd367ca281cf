package server_test

import (
	"io/fs"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stratadb/strata/api"
	"github.com/stratadb/strata/client"
	"github.com/stratadb/strata/server"
)

// A collection over HTTP keeps what its rules keep (the newest versions,
// a tagged one) and deletes the rest once old enough; a dry run changes
// nothing; a retention below the floor, a bad duration or an unknown field
// is a 400.
func TestACollectionOverHTTP(t *testing.T) {
	dir := t.TempDir()
	f := start(t, "file://"+dir, server.Options{})
	first := eventBatch(1, 2)
	defer first.Release()
	if _, err := f.c.CreateTable(ctx, "t", events, first); err != nil { // v1
		t.Fatal(err)
	}
	for _, id := range []int64{3, 4, 5} { // v2, v3, v4
		rec := eventBatch(id)
		if _, err := f.c.Overwrite(ctx, "t", rec); err != nil {
			t.Fatal(err)
		}
		rec.Release()
	}
	if err := f.c.CreateTag(ctx, "t", "keep", 2); err != nil {
		t.Fatal(err)
	}
	// Everything the table wrote two hours ago, as the store sees it.
	then := time.Now().Add(-2 * time.Hour)
	if err := filepath.WalkDir(filepath.Join(dir, "t"), func(p string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		return os.Chtimes(p, then, then)
	}); err != nil {
		t.Fatal(err)
	}
	one := 1
	plan, err := f.c.GC(ctx, "t", api.GCRequest{KeepVersions: &one, Retain: "1h", DryRun: true})
	if err != nil || !plan.DryRun || plan.Plan == "" {
		t.Fatalf("a dry run: %+v %v", plan, err)
	}
	if _, err := f.c.Scan(ctx, "t", client.ScanOptions{Version: 1}); err != nil {
		t.Fatalf("v1 after a dry run: %v", err)
	}
	res, err := f.c.GC(ctx, "t", api.GCRequest{KeepVersions: &one, Retain: "1h"})
	if err != nil || res.VersionsDeleted != 2 || res.ObjectsDeleted == 0 || res.BytesFreed == 0 || res.Boundary != 3 {
		t.Fatalf("a collection keeping 1 version and the tagged v2: %+v %v", res, err)
	}
	if _, err := f.c.Scan(ctx, "t", client.ScanOptions{Version: 1}); !client.IsCode(err, api.CodeNotFound) {
		t.Fatalf("v1 after the collection: %v", err)
	}
	for o, want := range map[string]map[int64]int{"keep": {3: 1}, "": {5: 1}} {
		recs, err := f.c.Scan(ctx, "t", client.ScanOptions{Tag: o})
		if err != nil {
			t.Fatal(err)
		}
		if got := ids(t, recs); !maps.Equal(got, want) {
			t.Errorf("tag %q after the collection: %v, want %v", o, got, want)
		}
	}
	for body, want := range map[string]string{
		`{"retain": "1m"}`:       "below the floor",
		`{"safety_age": "soon"}`: "not a duration",
		`{"keep_versions": -1}`:  "at least 1",
		`{"keep_versions": 0}`:   "at least 1",
		`{"retian": "2h"}`:       "retian",
	} {
		if code, out := raw(t, f, "POST", "/api/v1/tables/t/gc", "application/json", body, ""); code != http.StatusBadRequest || !strings.Contains(out, want) {
			t.Errorf("POST gc %s: %d %s, want 400 saying %q", body, code, out, want)
		}
	}
}
