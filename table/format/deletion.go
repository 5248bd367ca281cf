package format

import (
	"context"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math"
	"slices"
	"sync"

	"github.com/stratadb/strata/blob"
)

// Deletion vector objects list the deleted row offsets of one fragment:
//
//	offset size
//	0      8    magic "STRATADV"
//	8      4    format version (1), little-endian
//	12     8    count n
//	20     4    CRC-32C of the offsets
//	24     4n   row offsets, uint32 little-endian, strictly ascending
const (
	deletionMagic  = "STRATADV"
	deletionHeader = 24
)

// EncodeDeletions serialises sorted, distinct row offsets.
func EncodeDeletions(rows []uint32) []byte {
	out := make([]byte, deletionHeader+4*len(rows))
	copy(out, deletionMagic)
	binary.LittleEndian.PutUint32(out[8:], 1)
	binary.LittleEndian.PutUint64(out[12:], uint64(len(rows)))
	for i, r := range rows {
		binary.LittleEndian.PutUint32(out[deletionHeader+4*i:], r)
	}
	binary.LittleEndian.PutUint32(out[20:], crc32.Checksum(out[deletionHeader:], CRCTable))
	return out
}

// DecodeDeletions parses a deletion vector read from key.
func DecodeDeletions(key string, data []byte) ([]uint32, error) {
	if len(data) < deletionHeader || string(data[:8]) != deletionMagic {
		return nil, Corrupt(key, "not a deletion vector", nil)
	}
	if v := binary.LittleEndian.Uint32(data[8:]); v != 1 {
		return nil, fmt.Errorf("table: deletion vector %q has format %d: %w", key, v, ErrUnsupportedFormat)
	}
	n := binary.LittleEndian.Uint64(data[12:])
	if body := uint64(len(data) - deletionHeader); body%4 != 0 || body/4 != n { // not 4*n: it wraps
		return nil, Corrupt(key, fmt.Sprintf("holds %d bytes of offsets, header says %d offsets", len(data)-deletionHeader, n), nil)
	}
	if crc32.Checksum(data[deletionHeader:], CRCTable) != binary.LittleEndian.Uint32(data[20:]) {
		return nil, Corrupt(key, "checksum mismatch", nil)
	}
	rows := make([]uint32, n)
	for i := range rows {
		rows[i] = binary.LittleEndian.Uint32(data[deletionHeader+4*i:])
		if i > 0 && rows[i] <= rows[i-1] {
			return nil, Corrupt(key, "offsets not strictly ascending", nil)
		}
	}
	return rows, nil
}

// ReadDeletions reads a fragment's deletion vector: the deleted row
// offsets, ascending (nil when it has none). The vector is checked against
// the fragment entry; a mismatch is a CorruptError naming the object. A
// vector that deletes every row is not read: the entry's count says it
// all, and a scan passes such a fragment over unread, so every reader
// (scans, changes, deletes) sees the same rows whether its object is
// there or not (garbage collection may take it during its delete's
// stall; see commit.Table.Delete).
func ReadDeletions(ctx context.Context, b blob.Bucket, f *Fragment) ([]uint32, error) {
	if f.Deletion == nil {
		return nil, nil
	}
	if f.Deletion.Count == f.Rows && f.Rows <= math.MaxUint32+1 {
		rows := make([]uint32, f.Rows)
		for i := range rows {
			rows[i] = uint32(i)
		}
		return rows, nil
	}
	data, err := b.Get(ctx, f.Deletion.Key)
	if err != nil {
		return nil, err
	}
	rows, err := DecodeDeletions(f.Deletion.Key, data)
	if err != nil {
		return nil, err
	}
	if int64(len(rows)) != f.Deletion.Count || (len(rows) > 0 && int64(rows[len(rows)-1]) >= f.Rows) {
		return nil, Corrupt(f.Deletion.Key, fmt.Sprintf("%d offsets for a fragment of %d rows, manifest says %d deleted", len(rows), f.Rows, f.Deletion.Count), nil)
	}
	return rows, nil
}

// deletionCache holds vectors NewDeletions read, by fragment object and
// vector object (both immutable; a fragment's key is unique to it), so
// that upserts and deletes that come back to the same fragments plan
// without reading their vectors again. Scans, changes and repairs read
// the store: an object gone must show there. Bounded by offsets held; it
// starts afresh when full.
var deletionCache struct {
	sync.Mutex
	m    map[[2]string][]uint32
	held int
}

const deletionCacheMax = 8 << 20 // offsets (32 MiB)

// ReadDeletionsCached is ReadDeletions through deletionCache. The caller
// must not change the result.
func ReadDeletionsCached(ctx context.Context, b blob.Bucket, f *Fragment) ([]uint32, error) {
	if f.Deletion == nil {
		return nil, nil
	}
	k := [2]string{f.Key, f.Deletion.Key}
	deletionCache.Lock()
	rows, ok := deletionCache.m[k]
	deletionCache.Unlock()
	if ok && int64(len(rows)) == f.Deletion.Count {
		return rows, nil
	}
	rows, err := ReadDeletions(ctx, b, f)
	if err != nil {
		return nil, err
	}
	rows = slices.Clip(rows)
	deletionCache.Lock()
	if deletionCache.m == nil || deletionCache.held+len(rows) > deletionCacheMax {
		deletionCache.m, deletionCache.held = map[[2]string][]uint32{}, 0
	}
	if len(rows) <= deletionCacheMax {
		deletionCache.m[k] = rows
		deletionCache.held += len(rows)
	}
	deletionCache.Unlock()
	return rows, nil
}

// UnionSorted merges two ascending lists of rows without repeats.
func UnionSorted(a, b []uint32) []uint32 {
	out := append(slices.Clone(a), b...)
	slices.Sort(out)
	return slices.Compact(out)
}

// MinusSorted returns the values of ascending list a that ascending list
// b lacks.
func MinusSorted(a, b []uint32) []uint32 {
	var out []uint32
	for _, x := range a {
		if _, found := slices.BinarySearch(b, x); !found {
			out = append(out, x)
		}
	}
	return out
}
