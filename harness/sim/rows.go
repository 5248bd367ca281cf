package sim

import (
	"bytes"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/stratadb/strata/table"
)

// Rows are (id, val, blob) with val = mix(id) and blob up to 1 KiB of
// bytes drawn from id (blobOf): a row read back with another value or
// other bytes was corrupted or mixed up on the way.
var schema = arrow.NewSchema([]arrow.Field{
	{Name: "id", Type: arrow.PrimitiveTypes.Int64},
	{Name: "val", Type: arrow.PrimitiveTypes.Int64},
	{Name: "blob", Type: arrow.BinaryTypes.Binary},
}, nil)

// blobOf returns the artifact bytes of row id.
func blobOf(id int64) []byte {
	x := mix(uint64(id) ^ 0xb10b)
	b := make([]byte, x%1024)
	for i := range b {
		if i%8 == 0 {
			x = mix(x)
		}
		b[i] = byte(x >> (8 * (i % 8)))
	}
	return b
}

// mix is splitmix64's finaliser: a bijection that scatters ids.
func mix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

func valOf(id int64) int64 { return int64(mix(uint64(id))) }

// digest is an order-free summary of a multiset of rows: the number of
// rows and the sum of a hash of each. Adding and removing rows adds and
// subtracts digests.
type digest struct {
	Sum uint64
	N   int64
}

func rowHash(id int64) uint64 { return mix(uint64(id) ^ 0x5eed) }

func (d digest) add(o digest) digest { return digest{d.Sum + o.Sum, d.N + o.N} }
func (d digest) sub(o digest) digest { return digest{d.Sum - o.Sum, d.N - o.N} }

func (d digest) String() string { return fmt.Sprintf("%d rows/%016x", d.N, d.Sum) }

func batch(ids []int64) arrow.RecordBatch {
	b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	defer b.Release()
	for _, id := range ids {
		b.Field(0).(*array.Int64Builder).Append(id)
		b.Field(1).(*array.Int64Builder).Append(valOf(id))
		b.Field(2).(*array.BinaryBuilder).Append(blobOf(id))
	}
	return b.NewRecordBatch()
}

// readRows drains a scan into a count per id, failing on a row whose value
// is not its id's.
func readRows(scan func(yield func(arrow.RecordBatch, error) bool)) (map[int64]int, digest, error) {
	return (*world)(nil).readRowsOf(nil, scan)
}

// readRowsOf is readRows of a version whose schema is sc, whose added
// columns it checks too (checkExtras; sc is nil when w is).
func (w *world) readRowsOf(sc *arrow.Schema, scan func(yield func(arrow.RecordBatch, error) bool)) (map[int64]int, digest, error) {
	seen := map[int64]int{}
	var d digest
	for rec, err := range scan {
		if err != nil {
			return nil, d, err
		}
		if err := w.checkExtras(sc, rec); err != nil {
			return nil, d, err
		}
		ids := rec.Column(0).(*array.Int64).Int64Values()
		vals := rec.Column(1).(*array.Int64).Int64Values()
		blobs := rec.Column(2).(*array.Binary)
		for i, id := range ids {
			if vals[i] != valOf(id) && !isKey(id) { // a key's value is checked at the end (checkKeys)
				return nil, d, &Violation{Oracle: "row integrity", Detail: fmt.Sprintf("row %d reads back with value %d, want %d", id, vals[i], valOf(id))}
			}
			if !bytes.Equal(blobs.Value(i), blobOf(id)) {
				return nil, d, &Violation{Oracle: "row integrity", Detail: fmt.Sprintf("row %d reads back with a blob of %d bytes unlike the %d it was written with", id, len(blobs.Value(i)), len(blobOf(id)))}
			}
			seen[id]++
			d = d.add(digest{rowHash(id), 1})
		}
	}
	return seen, d, nil
}

// scanSnapshot reads every row of s, one fragment at a time.
func (w *world) scanSnapshot(s *table.Snapshot) (map[int64]int, digest, error) {
	return w.readRowsOf(s.Manifest().Schema(), s.Scan(w.ctx, table.ScanOptions{Parallelism: 1}))
}
