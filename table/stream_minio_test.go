package table_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/harness/rollouts"
	"github.com/stratadb/strata/harness/testenv"
	"github.com/stratadb/strata/table"
	"github.com/stratadb/strata/table/format"
	"github.com/stratadb/strata/table/fragment"
)

// Against MinIO, a large fragment read whole — streamed, its row groups
// decoded as their bytes arrive — gives every row as written, in order;
// cut to half its size in the store, it is a CorruptError naming it and
// both sizes.
func TestVolumeALargeFragmentStreamsFromMinIO(t *testing.T) {
	b, err := blob.Open(ctx, testenv.MinIO(t).URL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	const rows = 2*fragment.RowGroupRows + 3000 // three row groups
	rec := rollouts.Batch(testenv.Allocator(t), 42, 3, 0, rows)
	defer rec.Release()
	_, s, frag, data := oneFragmentTableIn(t, b, rec)
	if frag.Bytes <= 4<<20 || frag.Bytes > 64<<20 {
		t.Fatalf("the fragment is %d bytes: not read whole by ranges", frag.Bytes)
	}
	var at int64
	for got, err := range s.Scan(ctx, table.ScanOptions{}) {
		if err != nil {
			t.Fatal(err)
		}
		want := rec.NewSlice(at, at+got.NumRows())
		if !array.RecordEqual(got, want) {
			t.Fatalf("rows %d to %d differ from those written", at, at+got.NumRows())
		}
		want.Release()
		at += got.NumRows()
	}
	if at != rows {
		t.Fatalf("scanned %d rows, wrote %d", at, rows)
	}

	if err := b.Put(ctx, frag.Key, bytes.NewReader(data[:len(data)/2])); err != nil {
		t.Fatal(err)
	}
	var got error
	for _, err := range s.Scan(ctx, table.ScanOptions{}) {
		if err != nil {
			got = err
		}
	}
	var ce *format.CorruptError
	if !errors.As(got, &ce) || ce.Key != frag.Key || !bytes.Contains([]byte(ce.Error()), []byte("the manifest says")) {
		t.Fatalf("scan of a fragment cut to half its size: %v, want a CorruptError naming %s and its sizes", got, frag.Key)
	}
}
