package table_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"runtime"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/metadata"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/blob/fault"
	"github.com/stratadb/strata/commit"
	"github.com/stratadb/strata/harness/rollouts"
	"github.com/stratadb/strata/harness/testenv"
	"github.com/stratadb/strata/table"
	"github.com/stratadb/strata/table/format"
	"github.com/stratadb/strata/table/fragment"
)

// A large fragment read whole, its row groups decoded at once as its
// bytes arrive, meets a failing store, a damaged page and a reader that
// stops early: each ends in an error naming what failed or a clean stop —
// never a panic, a hang, a row twice or rows out of order.
func TestVolumeALargeFragmentScanFailsCleanly(t *testing.T) {
	under, err := blob.Open(ctx, "mem://")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := commit.Create(ctx, under, rollouts.Schema, nil, nil); err != nil {
		t.Fatal(err)
	}
	tb, err := commit.OpenTable(ctx, under, nil)
	if err != nil {
		t.Fatal(err)
	}
	const rows = 2*fragment.RowGroupRows + 3000 // three row groups
	rec := rollouts.Batch(testenv.Allocator(t), 42, 0, 0, rows)
	defer rec.Release()
	if _, err := tb.Append(ctx, rec); err != nil {
		t.Fatal(err)
	}
	f := fault.Wrap(under, fault.Never())
	s, err := table.Open(ctx, f, nil)
	if err != nil {
		t.Fatal(err)
	}
	frag := s.Manifest().Fragments[0]
	if frag.Bytes <= 4<<20 {
		t.Fatalf("the fragment is %d bytes: too small to be read by ranges", frag.Bytes)
	}
	// scan reads the ids in order until the end, an error or stopAfter
	// batches, within a minute.
	scan := func(stopAfter int) (int64, error) {
		type result struct {
			n   int64
			err error
		}
		done := make(chan result, 1)
		go func() {
			var next int64
			batches := 0
			for rec, err := range s.Scan(ctx, table.ScanOptions{}) {
				if err != nil {
					done <- result{next, err}
					return
				}
				ids := rec.Column(0).(*array.Int64)
				for i := range ids.Len() {
					if ids.Value(i) != next {
						done <- result{next, errors.New("rows out of order or twice")}
						return
					}
					next++
				}
				if batches++; batches == stopAfter {
					break
				}
			}
			done <- result{next, nil}
		}()
		select {
		case r := <-done:
			return r.n, r.err
		case <-time.After(time.Minute):
			t.Fatal("the scan hangs")
			return 0, nil
		}
	}
	if n, err := scan(0); err != nil || n != rows {
		t.Fatalf("clean scan: %d rows, %v", n, err)
	}
	goroutines := runtime.NumGoroutine()
	if n, err := scan(1); err != nil || n == 0 || n >= rows {
		t.Fatalf("a scan stopped after one batch: %d rows, %v", n, err)
	}

	boom := errors.New("the store is down")
	f.SetInjector(fault.OnOps(fault.Always(fault.Fault{Action: fault.Fail, Err: boom}), fault.OpRangeGet))
	if _, err := scan(0); !errors.Is(err, boom) {
		t.Fatalf("a scan whose ranged reads fail: %v", err)
	}
	f.SetInjector(fault.Never())

	// Bytes flipped across the second row group's artifact column.
	data, err := under.Get(ctx, frag.Key)
	if err != nil {
		t.Fatal(err)
	}
	damageColumn(t, data, 1, "artifact")
	if err := under.Put(ctx, frag.Key, bytes.NewReader(data)); err != nil {
		t.Fatal(err)
	}
	var ce *format.CorruptError
	if n, err := scan(0); !errors.As(err, &ce) || ce.Key != frag.Key || n > fragment.RowGroupRows {
		t.Fatalf("a scan over a damaged page: %d rows, %v; want a CorruptError naming %s before row group 1's rows", n, err, frag.Key)
	}

	// Nothing of the scans is left running.
	testenv.Eventually(t, 10*time.Second, "the scans' goroutines to end", func() bool {
		return runtime.NumGoroutine() <= goroutines
	})
}

// stallingBucket holds every ranged read that starts within [from, to)
// until its context ends.
type stallingBucket struct {
	blob.Bucket
	from, to int64
}

func (s *stallingBucket) NewRangeReader(ctx context.Context, key string, off, n int64) (io.ReadCloser, error) {
	if off >= s.from && off < s.to {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return s.Bucket.NewRangeReader(ctx, key, off, n)
}

// A streamed fragment whose first row group is damaged while the bytes of
// the others do not all come: the scan ends with the CorruptError at once,
// rather than wait on the reads of row groups it will not hand on.
func TestVolumeAStreamedScanEndsWhenARowGroupFails(t *testing.T) {
	rec := rollouts.Batch(testenv.Allocator(t), 42, 0, 0, 2*fragment.RowGroupRows+3000)
	defer rec.Release()
	under, _, frag, data := oneFragmentTable(t, rec)
	md := damageColumn(t, data, 0, "artifact")
	if err := under.Put(ctx, frag.Key, bytes.NewReader(data)); err != nil {
		t.Fatal(err)
	}
	// The parts of the body that start past row group 0 stall; the
	// footer comes.
	rg1, _ := md.RowGroup(1).ColumnChunk(0)
	s, err := table.Open(ctx, &stallingBucket{Bucket: under, from: rg1.DataPageOffset(), to: frag.Bytes - 64<<10}, nil)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		var got error
		for _, err := range s.Scan(ctx, table.ScanOptions{}) {
			if err != nil {
				got = err
			}
		}
		done <- got
	}()
	select {
	case err := <-done:
		var ce *format.CorruptError
		if !errors.As(err, &ce) || ce.Key != frag.Key {
			t.Fatalf("scan: %v, want a CorruptError naming %s", err, frag.Key)
		}
	case <-time.After(time.Minute):
		t.Fatal("the scan waits for row groups it will not hand on")
	}
}

// damageColumn flips bytes across column name of row group rg of the
// Parquet file in data, where zstd's checksum of a page catches them (a
// flip in a page header's statistics would pass, hence several), and
// returns the file's footer.
func damageColumn(t *testing.T, data []byte, rg int, name string) *metadata.FileMetaData {
	t.Helper()
	pf, err := file.NewParquetReader(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	md := pf.MetaData()
	col, err := md.RowGroup(rg).ColumnChunk(md.Schema.ColumnIndexByName(name))
	if err != nil {
		t.Fatal(err)
	}
	for k := range int64(8) {
		data[col.DataPageOffset()+(2*k+1)*col.TotalCompressedSize()/16] ^= 0x5a
	}
	return md
}
