package table_test

import (
	"bytes"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/harness/rollouts"
	"github.com/stratadb/strata/harness/testenv"
	"github.com/stratadb/strata/table"
	"github.com/stratadb/strata/table/expr"
	"github.com/stratadb/strata/table/format"
	"github.com/stratadb/strata/table/fragment"
	"github.com/stratadb/strata/table/value"
)

// projected scans s for cols, and returns the batches' columns
// concatenated per column as the rows' Go values.
func projected(t *testing.T, s *table.Snapshot, opts table.ScanOptions) [][]any {
	t.Helper()
	var out [][]any
	for rec, err := range s.Scan(ctx, opts) {
		if err != nil {
			t.Fatal(err)
		}
		if out == nil {
			out = make([][]any, rec.NumCols())
		}
		for c := range int(rec.NumCols()) {
			col := rec.Column(c)
			for i := range col.Len() {
				out[c] = append(out[c], col.GetOneForMarshal(i))
			}
		}
	}
	return out
}

// A scan of some columns of a fragment whose entry records where its
// bytes lie asks, in one round trip, for its footer and the spans that
// hold those columns' chunks — two ranged reads here (id and reward lie
// close together), a few kilobytes of a fragment of hundreds — and gives
// the rows a whole read gives.
func TestVolumeAProjectedScanReadsItsColumnsAndFooterAlone(t *testing.T) {
	b, err := blob.Open(ctx, "mem://")
	if err != nil {
		t.Fatal(err)
	}
	rec := rollouts.Batch(testenv.Allocator(t), 42, 0, 0, 200)
	defer rec.Release()
	_, s, frag, _ := oneFragmentTableIn(t, b, rec)
	if len(frag.Chunks) != len(rollouts.Schema.Fields())+1 || frag.Footer <= 8 || frag.Footer >= frag.Bytes {
		t.Fatalf("the fragment's entry records chunks %v and a footer of %d bytes, of %d", frag.Chunks, frag.Footer, frag.Bytes)
	}
	opts := table.ScanOptions{Columns: []string{"reward", "id"}}
	before, _ := blob.StatsOf(b)
	got := projected(t, s, opts)
	after, _ := blob.StatsOf(b)
	d := after.Sub(before)
	if d.Gets != 0 || d.RangeGets != 2 || d.BytesIn*10 > frag.Bytes {
		t.Fatalf("a scan of id and reward made %d whole and %d ranged reads of %d bytes, of a %d-byte fragment: want 2 ranged reads of a tenth of it at most",
			d.Gets, d.RangeGets, d.BytesIn, frag.Bytes)
	}
	if len(got) != 2 || len(got[0]) != 200 {
		t.Fatalf("the scan gave %d columns", len(got))
	}
	for i := range 200 {
		if got[1][i] != rec.Column(0).(*array.Int64).Value(i) || got[0][i] != rec.Column(4).(*array.Float64).Value(i) {
			t.Fatalf("row %d: id %v reward %v, want %v %v", i, got[1][i], got[0][i],
				rec.Column(0).(*array.Int64).Value(i), rec.Column(4).(*array.Float64).Value(i))
		}
	}
	// Filtered (one row group: nothing for its footer to rule out), the
	// filter's column is asked for with the others; the snapshot kept the
	// footer its first scan read, so that is one request.
	before, _ = blob.StatsOf(b)
	rows := projected(t, s, table.ScanOptions{Columns: []string{"id"}, Filter: expr.Ge("reward", value.Float(0.5))})
	after, _ = blob.StatsOf(b)
	if d := after.Sub(before); d.Gets != 0 || d.RangeGets != 1 {
		t.Fatalf("a filtered scan made %d whole and %d ranged reads, want 1 ranged", d.Gets, d.RangeGets)
	}
	want := 0
	for i := range 200 {
		if rec.Column(4).(*array.Float64).Value(i) >= 0.5 {
			want++
		}
	}
	if len(rows) != 1 || len(rows[0]) != want {
		t.Fatalf("the filtered scan gave %v rows, want %d", len(rows), want)
	}
	// A snapshot of its own asks for the footer again.
	s2, err := table.Open(ctx, b, nil)
	if err != nil {
		t.Fatal(err)
	}
	before, _ = blob.StatsOf(b)
	projected(t, s2, opts)
	after, _ = blob.StatsOf(b)
	if d := after.Sub(before); d.Gets != 0 || d.RangeGets != 2 {
		t.Fatalf("a scan of another snapshot made %d whole and %d ranged reads, want 2 ranged", d.Gets, d.RangeGets)
	}
}

// A snapshot's scans keep the footers they read: a fragment read whole
// once (a full scan) is read by the spans of its columns alone next time.
func TestVolumeAScanAfterAFullScanAsksForChunksAlone(t *testing.T) {
	b, err := blob.Open(ctx, "mem://")
	if err != nil {
		t.Fatal(err)
	}
	rec := rollouts.Batch(testenv.Allocator(t), 42, 0, 0, 300)
	defer rec.Release()
	_, s, _, _ := oneFragmentTableIn(t, b, rec)
	all := projected(t, s, table.ScanOptions{})
	before, _ := blob.StatsOf(b)
	got := projected(t, s, table.ScanOptions{Columns: []string{"worker"}})
	after, _ := blob.StatsOf(b)
	if d := after.Sub(before); d.Gets != 0 || d.RangeGets != 1 {
		t.Fatalf("a scan of worker after a full scan made %d whole and %d ranged reads, want 1 ranged", d.Gets, d.RangeGets)
	}
	if !equalValues(got[0], all[1]) {
		t.Fatalf("worker read alone differs from worker read with every column")
	}
}

// Where a fragment's bytes lie is a hint its entry gives: wrong — shifted,
// too short, too long, past the object, of another schema's leaves, or
// absurd — it costs reads, never rows: every scan gives what the fragment
// holds.
func TestVolumeWrongChunkHintsCostReadsNotRows(t *testing.T) {
	b, err := blob.Open(ctx, "mem://")
	if err != nil {
		t.Fatal(err)
	}
	rec := rollouts.Batch(testenv.Allocator(t), 42, 1, 0, 300)
	defer rec.Release()
	_, s, frag, _ := oneFragmentTableIn(t, b, rec)
	opts := table.ScanOptions{Columns: []string{"id", "reward", "worker"}}
	want := projected(t, s, opts)
	n := len(frag.Chunks)
	hints := map[string]func(f *format.Fragment){
		"shifted":          func(f *format.Fragment) { f.Chunks[0] += 100 },
		"shifted back":     func(f *format.Fragment) { f.Chunks[0] = 4; f.Chunks[1] += f.Chunks[0] },
		"a short footer":   func(f *format.Fragment) { f.Footer = 12 },
		"a long footer":    func(f *format.Fragment) { f.Footer = f.Bytes - 4 },
		"past the object":  func(f *format.Fragment) { f.Chunks[n-1] = f.Bytes },
		"too many chunks":  func(f *format.Fragment) { f.Chunks = append(f.Chunks, 1, 1) },
		"a chunk of zero":  func(f *format.Fragment) { f.Chunks[2] = 0 },
		"a negative chunk": func(f *format.Fragment) { f.Chunks[2] = -5 },
		"overflowing":      func(f *format.Fragment) { f.Chunks[1] = 1 << 62; f.Chunks[2] = 1 << 62 },
		"a chunk each": func(f *format.Fragment) {
			for i := range f.Chunks {
				f.Chunks[i] = 1
			}
			f.Chunks[0] = 4
		},
	}
	for name, spoil := range hints {
		f := frag
		f.Chunks = append([]int64(nil), frag.Chunks...)
		spoil(&f)
		got := projected(t, table.SnapshotOf(b, rollouts.Schema, []format.Fragment{f}), opts)
		for c := range want {
			if len(got) != len(want) || !equalValues(got[c], want[c]) {
				t.Fatalf("%s: the scan's column %d differs from the fragment's", name, c)
			}
		}
	}
}

func equalValues(a, b []any) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// A fragment cut short or replaced in the store, read by the spans its
// entry records — its footer kept by the snapshot from an earlier scan, or
// read afresh — is an error naming it, never a panic nor rows: every
// ranged read checks the object's size the store gives with it.
func TestVolumeAFragmentCutShortReadBySpansIsAnError(t *testing.T) {
	for _, store := range []string{"mem", "file", "minio"} {
		t.Run(store, func(t *testing.T) {
			url := "mem://"
			switch store {
			case "file":
				url = "file://" + t.TempDir()
			case "minio":
				url = testenv.MinIO(t).URL(t)
			}
			b, err := blob.Open(ctx, url)
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			rec := rollouts.Batch(testenv.Allocator(t), 42, 2, 0, 400)
			defer rec.Release()
			_, s, frag, data := oneFragmentTableIn(t, b, rec)
			projected(t, s, table.ScanOptions{}) // the snapshot keeps the footer
			other := rollouts.Batch(testenv.Allocator(t), 43, 2, 0, 350)
			defer other.Release()
			replacement, _, err := fragment.Encode(rollouts.Schema, []arrow.RecordBatch{other}, nil)
			if err != nil {
				t.Fatal(err)
			}
			for _, bad := range [][]byte{data[:len(data)/2], data[:len(data)-20], data[:7], replacement} {
				if err := b.Put(ctx, frag.Key, bytes.NewReader(bad)); err != nil {
					t.Fatal(err)
				}
				fresh, err := table.Open(ctx, b, nil)
				if err != nil {
					t.Fatal(err)
				}
				for name, snap := range map[string]*table.Snapshot{"kept footer": s, "fresh": fresh} {
					var got error
					rows := 0
					for rec, err := range snap.Scan(ctx, table.ScanOptions{Columns: []string{"id"}}) {
						if err != nil {
							got = err
							break
						}
						rows += int(rec.NumRows())
					}
					if got == nil || !bytes.Contains([]byte(got.Error()), []byte(frag.Key)) {
						t.Fatalf("%s, object of %d bytes in place of %d: %d rows, error %v; want an error naming %s", name, len(bad), len(data), rows, got, frag.Key)
					}
				}
			}
		})
	}
}

// Against MinIO, a projected scan of small fragments reads their footers
// and the named columns' chunks: a few percent of the table's bytes, the
// rows as written.
func TestVolumeAProjectedScanOfMinIOReadsTheNamedColumns(t *testing.T) {
	b, err := blob.Open(ctx, testenv.MinIO(t).URL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	rec := rollouts.Batch(testenv.Allocator(t), 42, 5, 0, 500)
	defer rec.Release()
	_, s, frag, _ := oneFragmentTableIn(t, b, rec)
	counted := blob.NewCounted(b)
	snap := table.SnapshotOf(counted, rollouts.Schema, s.Manifest().Fragments)
	got := projected(t, snap, table.ScanOptions{Columns: []string{"step"}})
	st := counted.Stats()
	if st.Gets != 0 || st.RangeGets != 2 || st.BytesIn*20 > frag.Bytes {
		t.Fatalf("a scan of step made %d whole and %d ranged reads of %d bytes, of a %d-byte fragment", st.Gets, st.RangeGets, st.BytesIn, frag.Bytes)
	}
	steps := rec.Column(2).(*array.Int64)
	if len(got) != 1 || len(got[0]) != steps.Len() {
		t.Fatalf("the scan gave %d columns", len(got))
	}
	for i := range steps.Len() {
		if got[0][i] != steps.Value(i) {
			t.Fatalf("row %d: step %v, want %d", i, got[0][i], steps.Value(i))
		}
	}
}
