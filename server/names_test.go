package server_test

import (
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/stratadb/strata/client"
	"github.com/stratadb/strata/harness/rollouts"
	"github.com/stratadb/strata/harness/testenv"
	"github.com/stratadb/strata/server"
)

// A table's name is a path: the server creates, serves, lists and drops
// tables named like a table's own folders and tables nested in others'
// folders; dropping one leaves the tables nested in it; a table that would
// lie in another's own folder is refused, naming both.
func TestTablesNamedLikeFoldersAndNestedOnes(t *testing.T) {
	f := start(t, "file://"+t.TempDir(), server.Options{})
	names := []string{"runs", "runs/eval", "_versions", "data", "run_versions", "x/_shards/y"}
	for i, name := range names {
		if _, err := f.c.CreateTable(ctx, name, rollouts.Schema); err != nil {
			t.Fatalf("create %q: %v", name, err)
		}
		rec := rollouts.Batch(testenv.Allocator(t), 42, i, 0, 10+i)
		n, err := f.c.Append(ctx, name, rec)
		rec.Release()
		if err != nil || n != int64(10+i) {
			t.Fatalf("append to %q: %d %v", name, n, err)
		}
		if err := f.c.CheckpointLSM(ctx, name); err != nil {
			t.Fatal(err)
		}
	}
	listed := func() []string {
		tables, err := f.c.Tables(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, l := range tables {
			got = append(got, l.Name)
		}
		return got
	}
	want := slices.Sorted(slices.Values(names))
	if got := listed(); !slices.Equal(got, want) {
		t.Fatalf("tables %q, want %q", got, want)
	}
	for i, name := range names {
		info, err := f.c.Describe(ctx, name)
		if err != nil || info.Name != name || info.Rows != int64(10+i) {
			t.Fatalf("describe %q: %+v %v", name, info, err)
		}
	}
	for _, name := range []string{"runs/_shards/z", "runs/data"} {
		_, err := f.c.CreateTable(ctx, name, rollouts.Schema)
		if !client.IsStatus(err, http.StatusConflict) || !strings.Contains(err.Error(), "bad_placement") || !strings.Contains(err.Error(), `of table "runs"`) {
			t.Errorf("create %q: %v, want a 409 bad_placement naming runs", name, err)
		}
	}
	// Dropping runs leaves runs/eval, which lies in a folder not its own.
	if err := f.c.Drop(ctx, "runs"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.c.Describe(ctx, "runs"); !client.IsStatus(err, http.StatusNotFound) {
		t.Fatalf("runs after its drop: %v", err)
	}
	if info, err := f.c.Describe(ctx, "runs/eval"); err != nil || info.Rows != 11 {
		t.Fatalf("runs/eval after runs was dropped: %+v %v", info, err)
	}
	if got := listed(); slices.Contains(got, "runs") || !slices.Contains(got, "runs/eval") {
		t.Fatalf("tables after the drop: %q", got)
	}
}
