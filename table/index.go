package table

import (
	"context"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"slices"
	"sort"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/table/expr"
	"github.com/stratadb/strata/table/format"
	"github.com/stratadb/strata/table/value"
)

// Key index objects, _indices/<id>/index.bin, map an integer column's
// values to row addresses (a string or binary column's are paged by hash:
// hashindex.go):
//
//	offset size
//	0      8    magic "STRATAIX"
//	8      4    format version (1)
//	12     8    entry count n
//	20     4    CRC-32C of the rest
//	24     8n   keys, int64, ascending
//	…      8n   fragment ids, uint64
//	…      4n   row offsets, uint32
const (
	indexMagic  = "STRATAIX"
	indexHeader = 24
)

// IndexEntry is one key's row address.
type IndexEntry struct {
	Key      int64
	Fragment uint64
	Offset   uint32
}

// EncodeIndex serialises entries (sorted here by key).
func EncodeIndex(entries []IndexEntry) []byte {
	slices.SortFunc(entries, func(a, b IndexEntry) int {
		if a.Key != b.Key {
			return cmpInt(a.Key, b.Key)
		}
		return cmpInt(int64(a.Fragment), int64(b.Fragment))
	})
	n := len(entries)
	out := make([]byte, indexHeader+20*n)
	copy(out, indexMagic)
	binary.LittleEndian.PutUint32(out[8:], 1)
	binary.LittleEndian.PutUint64(out[12:], uint64(n))
	body := out[indexHeader:]
	for i, e := range entries {
		binary.LittleEndian.PutUint64(body[8*i:], uint64(e.Key))
		binary.LittleEndian.PutUint64(body[8*n+8*i:], e.Fragment)
		binary.LittleEndian.PutUint32(body[16*n+4*i:], e.Offset)
	}
	binary.LittleEndian.PutUint32(out[20:], crc32.Checksum(body, format.CRCTable))
	return out
}

func cmpInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// keyIndex is a decoded index object.
type keyIndex struct {
	keys  []int64
	frags []uint64
	offs  []uint32
}

func decodeIndex(key string, data []byte) (*keyIndex, error) {
	if len(data) < indexHeader || string(data[:8]) != indexMagic {
		return nil, format.Corrupt(key, "not a key index", nil)
	}
	if v := binary.LittleEndian.Uint32(data[8:]); v != 1 {
		return nil, fmt.Errorf("table: key index %q has format %d: %w", key, v, format.ErrUnsupportedFormat)
	}
	n := binary.LittleEndian.Uint64(data[12:])
	body := data[indexHeader:]
	if uint64(len(body))%20 != 0 || uint64(len(body))/20 != n { // not 20*n: it wraps
		return nil, format.Corrupt(key, fmt.Sprintf("holds %d bytes for %d entries", len(body), n), nil)
	}
	if crc32.Checksum(body, format.CRCTable) != binary.LittleEndian.Uint32(data[20:]) {
		return nil, format.Corrupt(key, "checksum mismatch", nil)
	}
	ix := &keyIndex{keys: make([]int64, n), frags: make([]uint64, n), offs: make([]uint32, n)}
	for i := range int(n) {
		ix.keys[i] = int64(binary.LittleEndian.Uint64(body[8*i:]))
		ix.frags[i] = binary.LittleEndian.Uint64(body[8*int(n)+8*i:])
		ix.offs[i] = binary.LittleEndian.Uint32(body[16*int(n)+4*i:])
		if i > 0 && (ix.keys[i] < ix.keys[i-1] || ix.keys[i] == ix.keys[i-1] && ix.frags[i] < ix.frags[i-1]) {
			return nil, format.Corrupt(key, "entries not sorted by key", nil) // lookups search them
		}
	}
	return ix, nil
}

// Index objects never change, so decoded ones are kept, a few at a time.
var indexCache struct {
	sync.Mutex
	m map[string]*keyIndex
}

func loadIndex(ctx context.Context, b blob.Bucket, key string) (*keyIndex, error) {
	indexCache.Lock()
	ix, ok := indexCache.m[key]
	indexCache.Unlock()
	if ok {
		return ix, nil
	}
	data, err := b.Get(ctx, key)
	if err != nil {
		return nil, err
	}
	if ix, err = decodeIndex(key, data); err != nil {
		return nil, err
	}
	indexCache.Lock()
	if indexCache.m == nil || len(indexCache.m) >= 16 {
		indexCache.m = map[string]*keyIndex{}
	}
	indexCache.m[key] = ix
	indexCache.Unlock()
	return ix, nil
}

// IndexObject is a key index built for CreateIndex: the object's bytes,
// the rows it holds, and for a paged index (a string or binary column)
// where its directory lies (format.Index.Directory, Blocks).
type IndexObject struct {
	Data      []byte
	Rows      int64
	Directory int64
	Blocks    int
}

// BuildIndex scans the snapshot's column col (an integer, string or
// binary column) and encodes every live row's key and address as a key
// index: an integer column's as EncodeIndex does, a string or binary
// column's paged by hash (EncodeHashIndex).
func (s *Snapshot) BuildIndex(ctx context.Context, col string) (IndexObject, error) {
	sc := s.m.Schema()
	idx := sc.FieldIndices(col)
	if len(idx) != 1 {
		return IndexObject{}, fmt.Errorf("%w: key index: %s", expr.ErrBadColumns, format.NoColumn(col, sc))
	}
	kind := value.KindOf(sc.Field(idx[0]).Type)
	switch kind {
	case value.KindInt, value.KindString, value.KindBytes:
	default:
		return IndexObject{}, fmt.Errorf("%w: a key index needs an integer, string or binary column; %q is %s", expr.ErrBadColumns, col, sc.Field(idx[0]).Type)
	}
	var ints []IndexEntry
	var raw []HashEntry
	for rec, err := range s.Scan(ctx, ScanOptions{Columns: []string{col}, WithRowAddress: true}) {
		if err != nil {
			return IndexObject{}, err
		}
		frags := rec.Column(1).(*array.Uint64)
		offs := rec.Column(2).(*array.Uint32)
		for i := 0; i < int(rec.NumRows()); i++ {
			v, ok := format.ValueAt(rec.Column(0), i)
			if !ok {
				continue // nulls are not indexed
			}
			if kind == value.KindInt {
				ints = append(ints, IndexEntry{Key: v.I, Fragment: frags.Value(i), Offset: offs.Value(i)})
				continue
			}
			k, _ := keyBytes(v)
			raw = append(raw, HashEntry{Key: slices.Clone(k), Fragment: frags.Value(i), Offset: offs.Value(i)})
		}
	}
	if kind == value.KindInt {
		return IndexObject{Data: EncodeIndex(ints), Rows: int64(len(ints))}, nil
	}
	data, dir, blocks := EncodeHashIndex(raw)
	return IndexObject{Data: data, Rows: int64(len(raw)), Directory: dir, Blocks: blocks}, nil
}

// addr is a row address an index entry gives.
type addr struct {
	frag uint64
	off  uint32
}

// indexAddrs looks keys up in the key index ix: per key, the addresses
// its entries give, as they were when it was built. ok is false when ix
// cannot look keys up (a key of another kind than its column's).
func (s *Snapshot) indexAddrs(ctx context.Context, ix *format.Index, keys []value.Value) (_ [][]addr, ok bool, err error) {
	out := make([][]addr, len(keys))
	if hashedIndex(s.m.Schema(), ix) {
		raw := make([][]byte, len(keys))
		for i, k := range keys {
			if raw[i], ok = keyBytes(k); !ok {
				return nil, false, nil
			}
		}
		h, err := openHashIndex(ctx, s.b, ix)
		if err != nil {
			return nil, false, err
		}
		found, err := h.lookup(ctx, s.b, raw)
		if err != nil {
			return nil, false, err
		}
		for i, es := range found {
			for _, e := range es {
				out[i] = append(out[i], addr{e.Fragment, e.Offset})
			}
		}
		return out, true, nil
	}
	if !allInts(keys) {
		return nil, false, nil
	}
	kix, err := loadIndex(ctx, s.b, ix.Key)
	if err != nil {
		return nil, false, err
	}
	for j, k := range keys {
		i := sort.Search(len(kix.keys), func(i int) bool { return kix.keys[i] >= k.I })
		for ; i < len(kix.keys) && kix.keys[i] == k.I; i++ {
			out[j] = append(out[j], addr{kix.frags[i], kix.offs[i]})
		}
	}
	return out, true, nil
}

// hashedIndex says whether ix is paged by hash (see hashindex.go): an
// index of a string or binary column.
func hashedIndex(sc *arrow.Schema, ix *format.Index) bool {
	idx := sc.FieldIndices(ix.Column)
	if len(idx) != 1 {
		return false
	}
	k := value.KindOf(sc.Field(idx[0]).Type)
	return k == value.KindString || k == value.KindBytes
}

// keyBytes is the bytes a paged index holds of a string or binary key.
func keyBytes(k value.Value) ([]byte, bool) {
	switch k.Kind {
	case value.KindString:
		return []byte(k.S), true
	case value.KindBytes:
		return k.X, true
	}
	return nil, false
}

// resolveKeys follows each address an index gave for a key (addrs, per
// key) through the remap entries of later Rewrites: want holds the rows
// of live fragments that hold a key, found says which keys it resolved.
func (s *Snapshot) resolveKeys(ctx context.Context, addrs [][]addr) (want map[uint64][]uint32, found []bool, err error) {
	remap := map[uint64]format.RemapEntry{}
	for _, e := range s.m.Remap {
		remap[e.From] = e
	}
	want, found = map[uint64][]uint32{}, make([]bool, len(addrs))
	dvCache := map[string][]uint32{}
	var cands []candidate
	for k, as := range addrs {
		for _, a := range as {
			frag, off := a.frag, a.off
			ok := true
			for hops := 0; ok && hops < 1000; hops++ {
				e, moved := remap[frag]
				if !moved {
					break
				}
				if frag, off, ok, err = translate(ctx, e, s.b, off, dvCache); err != nil {
					return nil, nil, err
				}
			}
			if ok && s.m.Fragment(frag) != nil {
				cands = append(cands, candidate{k, frag, off})
			}
		}
	}
	// A key is found where its row is live: an upsert replaced a row the
	// index knows by deleting it, and wrote the key's row again where the
	// index does not look.
	dvs, err := s.vectorsOf(ctx, cands)
	if err != nil {
		return nil, nil, err
	}
	for _, c := range cands {
		if _, deleted := slices.BinarySearch(dvs[c.frag], c.off); deleted {
			continue
		}
		want[c.frag] = append(want[c.frag], c.off)
		found[c.key] = true
	}
	return want, found, nil
}

// candidate is a row the index gives for the key at position key.
type candidate struct {
	key  int
	frag uint64
	off  uint32
}

// vectorsOf reads the deletion vectors of the fragments of cands
// (NewDeletions of no new rows).
func (s *Snapshot) vectorsOf(ctx context.Context, cands []candidate) (map[uint64][]uint32, error) {
	frags := map[uint64][]uint32{}
	for _, c := range cands {
		frags[c.frag] = nil
	}
	return s.NewDeletions(ctx, frags, 8)
}

// unindexed returns the fragments some of whose rows the index ix lacks.
// A fragment's rows are all in the index when it is older than the index,
// or was rewritten from such fragments only.
func (s *Snapshot) unindexed(ix *format.Index) []uint64 {
	sources := map[uint64][]uint64{} // Rewrite output → its source fragments
	for _, e := range s.m.Remap {
		sources[e.To] = append(sources[e.To], e.From)
	}
	memo := map[uint64]bool{}
	var indexed func(id uint64, depth int) bool
	indexed = func(id uint64, depth int) bool {
		if id < ix.CoveredBelow {
			return true
		}
		if v, ok := memo[id]; ok {
			return v
		}
		src := sources[id]
		v := len(src) > 0 && depth < 1000
		for _, from := range src {
			v = v && indexed(from, depth+1)
		}
		memo[id] = v
		return v
	}
	var out []uint64
	for i := range s.m.Fragments {
		if !indexed(s.m.Fragments[i].ID, 0) {
			out = append(out, s.m.Fragments[i].ID)
		}
	}
	return out
}

// translate maps an offset of e.From to its place in e.To; ok is false
// when that row had been deleted before the Rewrite dropped it.
func translate(ctx context.Context, e format.RemapEntry, b blob.Bucket, off uint32, cache map[string][]uint32) (uint64, uint32, bool, error) {
	var dv []uint32
	if e.Deletion != "" {
		var ok bool
		if dv, ok = cache[e.Deletion]; !ok {
			data, err := b.Get(ctx, e.Deletion)
			if err != nil {
				return 0, 0, false, err
			}
			if dv, err = format.DecodeDeletions(e.Deletion, data); err != nil {
				return 0, 0, false, err
			}
			cache[e.Deletion] = dv
		}
	}
	before, deleted := slices.BinarySearch(dv, off)
	if deleted {
		return 0, 0, false, nil
	}
	return e.To, e.Base + off - uint32(before), true, nil
}
