package icebergcmd_test

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/cmd/strata-iceberg/icebergcmd"
	"github.com/stratadb/strata/cmd/strata/command"
	"github.com/stratadb/strata/commit"
	"github.com/stratadb/strata/harness/rollouts"
	"github.com/stratadb/strata/harness/testenv"
)

func run(args ...string) (code int, stdout, stderr string) {
	var out, errOut bytes.Buffer
	code = command.RunRoot(args, &command.Env{Out: &out, Err: &errOut, Open: blob.Open}, icebergcmd.New)
	return code, out.String(), errOut.String()
}

// --location is a URI without control characters: a newline in it would
// be written into every metadata file of the view.
func TestALocationWithAControlCharacterIsRefused(t *testing.T) {
	u := "file://" + t.TempDir() + "/t"
	for _, loc := range []string{"s3://lake/t\n", "s3://lake/t\nfile:///etc/x", "s3:/lake/t"} {
		code, out, errOut := run(u, "--location", loc)
		if code != 2 || out != "" || !strings.Contains(errOut, "invalid options: Location") {
			t.Errorf("--location %q: exit %d\n%s%s", loc, code, out, errOut)
		}
	}
	if code, _, errOut := run(u, "--keep-versions", "0"); code != 2 || !strings.Contains(errOut, "--keep-versions 0: want at least 1") {
		t.Errorf("--keep-versions 0: exit %d\n%s", code, errOut)
	}
	if code, _, errOut := run(); code != 2 || !strings.Contains(errOut, "takes 1 argument") {
		t.Errorf("no URL: exit %d\n%s", code, errOut)
	}
}

// An export prints the newest metadata's location, and a second one with
// nothing new writes nothing.
func TestAnExportPrintsTheMetadataLocation(t *testing.T) {
	dir, _, _ := newTable(t)
	want := "file://" + dir + "/_iceberg/metadata/v1.metadata.json\n"
	code, out, errOut := run("file://" + dir)
	if code != 0 || out != want || !strings.Contains(errOut, "version 1 is current; 1 snapshots (added 1 snapshots, dropped 0)") {
		t.Fatalf("exit %d\nstdout %q, want %q\nstderr %s", code, out, want, errOut)
	}
	if code, out, errOut := run("file://" + dir); code != 0 || out != want || !strings.Contains(errOut, "(unchanged)") {
		t.Fatalf("again: exit %d\nstdout %q\nstderr %s", code, out, errOut)
	}
}

// --as-of TIME makes the version committed at or before TIME the current
// snapshot, as --version does; with --version it is a usage error.
func TestAnExportAsOfATime(t *testing.T) {
	dir, b, rec := newTable(t)
	ctx := context.Background()
	time.Sleep(3 * time.Millisecond)
	afterV1 := time.Now().UTC().Format(time.RFC3339Nano)
	time.Sleep(3 * time.Millisecond)
	tb, err := commit.OpenTable(ctx, b, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tb.Append(ctx, rec); err != nil {
		t.Fatal(err)
	}
	if code, _, errOut := run("file://"+dir, "--as-of", afterV1); code != 0 || !strings.Contains(errOut, "version 1 is current") {
		t.Fatalf("--as-of just after v1: exit %d\n%s", code, errOut)
	}
	if code, _, errOut := run("file://"+dir, "--as-of", afterV1, "--version", "2"); code != 2 || !strings.Contains(errOut, "at most one of --version and --as-of") {
		t.Fatalf("--as-of with --version: exit %d\n%s", code, errOut)
	}
	if code, _, errOut := run("file://"+dir, "--as-of", "1h"); code != 5 || !strings.Contains(errOut, "the oldest retained, v1") {
		t.Fatalf("--as-of before the table: exit %d\n%s", code, errOut)
	}
}

// newTable makes a table of ten rows in a folder: its folder, its bucket
// and the rows (both closed and released when the test ends).
func newTable(t *testing.T) (string, blob.Bucket, arrow.RecordBatch) {
	t.Helper()
	dir := t.TempDir()
	b, err := blob.Open(context.Background(), "file://"+dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	rec := rollouts.Batch(testenv.Allocator(t), 1, 0, 0, 10)
	t.Cleanup(rec.Release)
	if _, err := commit.Create(context.Background(), b, rollouts.Schema, nil, nil, rec); err != nil {
		t.Fatal(err)
	}
	return dir, b, rec
}
