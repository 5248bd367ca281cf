package layout_test

import (
	"bytes"
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/commit"
	"github.com/stratadb/strata/harness/rollouts"
	"github.com/stratadb/strata/harness/testenv"
	"github.com/stratadb/strata/lakehouse"
	"github.com/stratadb/strata/lakehouse/layout"
)

// ReadRefs, which reads the metadata as JSON without the Iceberg writer,
// finds what the writer wrote: every snapshot's version, the newest
// metadata, the hint, and each snapshot's manifest list and manifests. A
// metadata file that does not parse, or lacks what it reads, is an error
// naming it and the remedy.
func TestReadRefsFindsWhatTheExportWrote(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	b, err := blob.Open(ctx, "file://"+dir)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if refs, err := layout.ReadRefs(ctx, b); err != nil || len(refs.Versions) != 0 || len(refs.Keys) != 1 {
		t.Fatalf("no view: %+v, %v; want the hint alone", refs, err)
	}
	rec := rollouts.Batch(testenv.Allocator(t), 1, 0, 0, 10)
	defer rec.Release()
	if _, err := commit.Create(ctx, b, rollouts.Schema, nil, nil, rec); err != nil {
		t.Fatal(err)
	}
	tb, err := commit.OpenTable(ctx, b, nil)
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := tb.Append(ctx, rec); err != nil {
			t.Fatal(err)
		}
	}
	res, err := lakehouse.Export(ctx, b, &lakehouse.Options{Location: "file://" + dir}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	refs, err := layout.ReadRefs(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(refs.Versions)
	if !slices.Equal(refs.Versions, res.Snapshots) {
		t.Fatalf("versions %v, the export described %v", refs.Versions, res.Snapshots)
	}
	lists, manifests := 0, 0
	for k := range refs.Keys {
		switch {
		case strings.Contains(k, "/snap-"):
			lists++
		case strings.HasSuffix(k, "-m.avro"):
			manifests++
		}
	}
	if !refs.Keys[res.MetadataKey] || !refs.Keys[layout.HintKey] || lists != 3 || manifests == 0 {
		t.Fatalf("keys %v: want %s, the hint, 3 manifest lists and their manifests", refs.Keys, res.MetadataKey)
	}
	// A manifest list that is not Avro, or whose entries lack a
	// manifest_path, is damaged: named, with the remedy.
	var list string
	for k := range refs.Keys {
		if strings.Contains(k, "/snap-") {
			list = k
		}
	}
	good, err := b.Get(ctx, list)
	if err != nil {
		t.Fatal(err)
	}
	for _, bad := range [][]byte{[]byte("not avro"), good[:len(good)/2], bytes.Replace(good, []byte("manifest_path"), []byte("manifest_paxh"), 1)} {
		if err := b.Put(ctx, list, bytes.NewReader(bad)); err != nil {
			t.Fatal(err)
		}
		if _, err := layout.ReadRefs(ctx, b); err == nil || !strings.Contains(err.Error(), list+" is not Iceberg Avro") || !strings.Contains(err.Error(), "delete _iceberg/") {
			t.Errorf("a damaged manifest list (%d bytes): %v, want it named, with the remedy", len(bad), err)
		}
	}
	for body, says := range map[string]string{
		`{"snapshots": []`:  "is not Iceberg metadata",
		`{"snapshots": []}`: `no "location"`,
		`{"location": "file:///x", "snapshots": [{"snapshot-id": 1}]}`: `no positive "snapshot-id" or no "manifest-list"`,
	} {
		if err := b.Put(ctx, layout.MetadataKey(2), strings.NewReader(body)); err != nil {
			t.Fatal(err)
		}
		_, err := layout.ReadRefs(ctx, b)
		if err == nil || !strings.Contains(err.Error(), says) || !strings.Contains(err.Error(), "delete _iceberg/") {
			t.Errorf("metadata %s: %v, want an error saying %q and the remedy", body, err, says)
		}
	}
}
