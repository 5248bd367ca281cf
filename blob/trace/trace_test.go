package trace_test

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/blob/trace"
)

func TestRecordsOneLinePerRequestWhileOn(t *testing.T) {
	ctx := context.Background()
	under, err := blob.Open(ctx, "mem://")
	if err != nil {
		t.Fatal(err)
	}
	b := trace.Wrap(under)
	if err := b.PutIfAbsent(ctx, "before", []byte("x")); err != nil { // not recorded
		t.Fatal(err)
	}
	boom := errors.New("boom")
	lines, err := b.Record(func() error {
		_ = b.Put(ctx, "a/01J9Z5V8Q2W3E4R5T6Y7V8X9Z0-deadbeef01", strings.NewReader("x"))
		_, _ = b.Get(ctx, "a/01J9Z5V8Q2W3E4R5T6Y7V8X9Z0-deadbeef01")
		_, _ = b.Attributes(ctx, "missing")
		for _, err := range blob.List(ctx, b, "a/", 0) {
			if err != nil {
				return err
			}
		}
		_ = b.Delete(ctx, "_compactor/history/00000000001700000000")
		return boom
	})
	if !errors.Is(err, boom) {
		t.Errorf("Record returned %v, want fn's error", err)
	}
	want := []string{"PUT a/01J9Z5V8Q2W3E4R5T6Y7V8X9Z0-deadbeef01", "GET a/01J9Z5V8Q2W3E4R5T6Y7V8X9Z0-deadbeef01", "HEAD missing", "LIST a/", "DELETE _compactor/history/00000000001700000000"}
	if !slices.Equal(lines, want) {
		t.Errorf("recorded %q, want %q", lines, want)
	}
	got := trace.Text("op", lines)
	wantText := "# op: 5 requests\nPUT a/<id>-<rnd>\nGET a/<id>-<rnd>\nHEAD missing\nLIST a/\nDELETE _compactor/history/<time>\n"
	if got != wantText {
		t.Errorf("Text:\n%s\nwant:\n%s", got, wantText)
	}
	if _, err := b.Get(ctx, "before"); err != nil {
		t.Fatal(err)
	}
	if again, _ := b.Record(func() error { return nil }); len(again) != 0 {
		t.Errorf("a new recording starts empty; got %q", again)
	}
	path := filepath.Join(t.TempDir(), "op.golden")
	trace.Golden(t, path, got, true, "-update")
	trace.Golden(t, path, got, false, "-update")
}
