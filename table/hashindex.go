package table

import (
	"bytes"
	"cmp"
	"context"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"hash/fnv"
	"io"
	"maps"
	"slices"
	"sort"
	"sync"

	"golang.org/x/sync/errgroup"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/table/format"
)

// A key index on a string or binary column (a UUID, a name) is paged, so
// that a lookup reads a few kilobytes of it, whatever the table's size:
// its entries, sorted by a 64-bit hash of the key (FNV-1a of its bytes),
// then the key, fragment and offset, are cut into blocks of HashBlock
// entries, and a directory at the end names each block's first hash and
// where it starts. A lookup of k reads the directory once (it is kept,
// the object never changing), then the one block (rarely two) whose hash
// range holds k's hash, and compares the keys themselves there: the hash
// only places them.
//
//	offset size
//	0      8    magic "STRATAIX"
//	8      4    format version (2)
//	12     …    blocks, one after another; a block is its entries, each:
//	              hash uint64, fragment id uint64, row offset uint32,
//	              key length uvarint, key bytes
//	            then the CRC-32C of the block's entries (4)
//	D      16b  directory: per block, its first entry's hash (uint64) and
//	            the offset it starts at (uint64)
//	…      4    CRC-32C of the directory
//	…      32   trailer: D (uint64), blocks b (uint32), entries n
//	            (uint64), version 2 (uint32), magic "STRATAIX"
//
// All integers are little-endian. The manifest's index entry records D
// and b (Index.Directory, Index.Blocks) so that the directory is read
// without first reading the trailer; without them, the object is read
// whole.

// HashBlock is the entries of a block of a paged key index.
const HashBlock = 256

const hashTrailer = 32

// HashEntry is one key's row address in a paged key index.
type HashEntry struct {
	Key      []byte
	Fragment uint64
	Offset   uint32
}

// KeyHash is the hash a paged key index places key by.
func KeyHash(key []byte) uint64 {
	h := fnv.New64a()
	h.Write(key)
	return h.Sum64()
}

// EncodeHashIndex serialises entries (sorted here) as a paged key index,
// and returns the directory's offset and the number of blocks for the
// manifest's index entry.
func EncodeHashIndex(entries []HashEntry) (data []byte, directory int64, blocks int) {
	hashes := make([]uint64, len(entries))
	order := make([]int, len(entries))
	for i := range entries {
		hashes[i], order[i] = KeyHash(entries[i].Key), i
	}
	slices.SortFunc(order, func(a, b int) int {
		return compareEntries(hashes[a], entries[a], hashes[b], entries[b])
	})
	out := append([]byte(indexMagic), 2, 0, 0, 0)
	var dir []byte
	for start := 0; start < len(order); start += HashBlock {
		at := len(out)
		dir = binary.LittleEndian.AppendUint64(dir, hashes[order[start]])
		dir = binary.LittleEndian.AppendUint64(dir, uint64(at))
		for _, i := range order[start:min(start+HashBlock, len(order))] {
			e := entries[i]
			out = binary.LittleEndian.AppendUint64(out, hashes[i])
			out = binary.LittleEndian.AppendUint64(out, e.Fragment)
			out = binary.LittleEndian.AppendUint32(out, e.Offset)
			out = binary.AppendUvarint(out, uint64(len(e.Key)))
			out = append(out, e.Key...)
		}
		out = binary.LittleEndian.AppendUint32(out, crc32.Checksum(out[at:], format.CRCTable))
		blocks++
	}
	directory = int64(len(out))
	out = append(out, dir...)
	out = binary.LittleEndian.AppendUint32(out, crc32.Checksum(dir, format.CRCTable))
	out = binary.LittleEndian.AppendUint64(out, uint64(directory))
	out = binary.LittleEndian.AppendUint32(out, uint32(blocks))
	out = binary.LittleEndian.AppendUint64(out, uint64(len(entries)))
	out = binary.LittleEndian.AppendUint32(out, 2)
	out = append(out, indexMagic...)
	return out, directory, blocks
}

// hashIndex is a paged key index's directory: what a lookup reads first.
type hashIndex struct {
	key    string // the object
	first  []uint64
	starts []int64 // len(first)+1: the last is the directory's offset
	// whole is the object when it was read whole (no hints).
	whole   []byte
	entries int
}

// Directories never change, so decoded ones are kept, a few at a time.
var hashIndexCache struct {
	sync.Mutex
	m map[string]*hashIndex
}

// openHashIndex reads ix's directory (through the cache).
func openHashIndex(ctx context.Context, b blob.Bucket, ix *format.Index) (*hashIndex, error) {
	hashIndexCache.Lock()
	h, ok := hashIndexCache.m[ix.Key]
	hashIndexCache.Unlock()
	if ok {
		return h, nil
	}
	var tail, whole []byte
	var at int64
	var err error
	if ix.Blocks > 0 && ix.Directory > 0 {
		at = ix.Directory
		tail, err = readRange(ctx, b, ix.Key, at, int64(16*ix.Blocks+4+hashTrailer))
	} else {
		whole, err = b.Get(ctx, ix.Key)
		tail = whole
	}
	if err != nil {
		return nil, err
	}
	if h, err = decodeHashDirectory(ix.Key, tail, at, whole); err != nil {
		return nil, err
	}
	hashIndexCache.Lock()
	if hashIndexCache.m == nil || len(hashIndexCache.m) >= 64 {
		hashIndexCache.m = map[string]*hashIndex{}
	}
	hashIndexCache.m[ix.Key] = h
	hashIndexCache.Unlock()
	return h, nil
}

// decodeHashDirectory parses the directory and trailer of a paged index:
// tail holds the object's bytes from offset at to its end.
func decodeHashDirectory(key string, tail []byte, at int64, whole []byte) (*hashIndex, error) {
	if len(tail) < hashTrailer || string(tail[len(tail)-8:]) != indexMagic {
		return nil, format.Corrupt(key, "not a paged key index (no trailer)", nil)
	}
	tr := tail[len(tail)-hashTrailer:]
	if v := binary.LittleEndian.Uint32(tr[20:]); v != 2 {
		return nil, fmt.Errorf("table: key index %q has format %d: %w", key, v, format.ErrUnsupportedFormat)
	}
	dirAt, blocks, entries := int64(binary.LittleEndian.Uint64(tr)), int64(binary.LittleEndian.Uint32(tr[8:])), binary.LittleEndian.Uint64(tr[12:])
	if dirAt < at || dirAt-at+16*blocks+4+hashTrailer != int64(len(tail)) {
		return nil, format.Corrupt(key, fmt.Sprintf("directory of %d blocks at %d does not end the object", blocks, dirAt), nil)
	}
	if entries > uint64(blocks)*HashBlock || entries+HashBlock <= uint64(blocks)*HashBlock {
		return nil, format.Corrupt(key, fmt.Sprintf("%d blocks for %d entries", blocks, entries), nil)
	}
	if whole != nil && (len(whole) < 12 || string(whole[:8]) != indexMagic || binary.LittleEndian.Uint32(whole[8:]) != 2) {
		return nil, format.Corrupt(key, "not a paged key index (no header)", nil)
	}
	dir := tail[dirAt-at : dirAt-at+16*blocks]
	if crc32.Checksum(dir, format.CRCTable) != binary.LittleEndian.Uint32(tail[dirAt-at+16*blocks:]) {
		return nil, format.Corrupt(key, "directory checksum mismatch", nil)
	}
	h := &hashIndex{key: key, first: make([]uint64, blocks), starts: make([]int64, blocks+1), whole: whole, entries: int(entries)}
	for i := range blocks {
		h.first[i] = binary.LittleEndian.Uint64(dir[16*i:])
		h.starts[i] = int64(binary.LittleEndian.Uint64(dir[16*i+8:]))
		if i > 0 && (h.first[i] < h.first[i-1] || h.starts[i] <= h.starts[i-1]) || i == 0 && h.starts[i] != 12 {
			return nil, format.Corrupt(key, "directory not in order", nil)
		}
	}
	h.starts[blocks] = dirAt
	if blocks > 0 && h.starts[blocks-1] >= dirAt {
		return nil, format.Corrupt(key, "directory not in order", nil)
	}
	return h, nil
}

// blocksOf is the blocks that may hold entries of hash: from the last
// whose first hash is below it to the last whose first hash is it.
func (h *hashIndex) blocksOf(hash uint64) (lo, hi int) {
	lo = sort.Search(len(h.first), func(i int) bool { return h.first[i] >= hash })
	hi = sort.Search(len(h.first), func(i int) bool { return h.first[i] > hash })
	return max(lo-1, 0), hi
}

// A lookup reads the blocks it needs at once, up to hashLookupReads
// ranged reads at a time; blocks less than hashLookupGap apart are read
// in one, the bytes between them included, so that a lookup of many keys
// (an upsert's) reads runs of blocks rather than a read a block.
const (
	hashLookupReads = 128
	hashLookupGap   = 256 << 10
)

// lookup returns, for each of keys, the row addresses the index holds for
// it (every entry whose key is equal), reading the blocks that may hold
// one at once (see hashLookupReads).
func (h *hashIndex) lookup(ctx context.Context, b blob.Bucket, keys [][]byte) ([][]HashEntry, error) {
	hashes := make([]uint64, len(keys))
	need := map[int]bool{}
	for j, k := range keys {
		hashes[j] = KeyHash(k)
		lo, hi := h.blocksOf(hashes[j])
		for i := lo; i < hi; i++ {
			need[i] = true
		}
	}
	blocks := make(map[int][]HashEntry, len(need))
	var mu sync.Mutex
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(hashLookupReads)
	for _, r := range readRuns(slices.Sorted(maps.Keys(need)), func(a, b int) bool { return h.starts[b]-h.starts[a+1] <= hashLookupGap }) {
		g.Go(func() error {
			data, base := h.whole, int64(0)
			if data == nil {
				var err error
				base = h.starts[r[0]]
				if data, err = readRange(gctx, b, h.key, base, h.starts[r[1]+1]-base); err != nil {
					return err
				}
			}
			for i := r[0]; i <= r[1]; i++ {
				if !need[i] {
					continue
				}
				es, err := h.block(data, base, i)
				if err != nil {
					return err
				}
				mu.Lock()
				blocks[i] = es
				mu.Unlock()
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	out := make([][]HashEntry, len(keys))
	for j, k := range keys {
		lo, hi := h.blocksOf(hashes[j])
		for i := lo; i < hi; i++ {
			for _, e := range blocks[i] {
				if bytes.Equal(e.Key, k) {
					out[j] = append(out[j], e)
				}
			}
		}
	}
	return out, nil
}

// readRuns groups the blocks need (ascending) into runs [first, last]
// to read at once: a block joins the run before it when near(last, it).
func readRuns(need []int, near func(a, b int) bool) [][2]int {
	var runs [][2]int
	for _, b := range need {
		if n := len(runs); n > 0 && near(runs[n-1][1], b) {
			runs[n-1][1] = b
			continue
		}
		runs = append(runs, [2]int{b, b})
	}
	return runs
}

// block decodes block i from data, the object's bytes from offset base
// through the block's end at least.
func (h *hashIndex) block(data []byte, base int64, i int) ([]HashEntry, error) {
	start, end := h.starts[i]-base, h.starts[i+1]-base
	if start < 0 || int64(len(data)) < end {
		return nil, format.Corrupt(h.key, fmt.Sprintf("block %d lies outside the bytes read", i), nil)
	}
	data = data[start:end]
	if len(data) < 4 {
		return nil, format.Corrupt(h.key, fmt.Sprintf("block %d holds %d bytes, too few for its checksum", i, len(data)), nil)
	}
	body := data[:len(data)-4]
	if crc32.Checksum(body, format.CRCTable) != binary.LittleEndian.Uint32(data[len(body):]) {
		return nil, format.Corrupt(h.key, fmt.Sprintf("block %d checksum mismatch", i), nil)
	}
	var out []HashEntry
	var prev uint64 // the hash of the entry before
	for len(body) > 0 {
		if len(body) < 20 {
			return nil, format.Corrupt(h.key, fmt.Sprintf("block %d ends inside an entry", i), nil)
		}
		e := HashEntry{Fragment: binary.LittleEndian.Uint64(body[8:]), Offset: binary.LittleEndian.Uint32(body[16:])}
		n, w := binary.Uvarint(body[20:])
		if w <= 0 || uint64(len(body)-20-w) < n {
			return nil, format.Corrupt(h.key, fmt.Sprintf("block %d ends inside an entry", i), nil)
		}
		e.Key = body[20+w : 20+w+int(n)]
		first := len(out) == 0
		hash := binary.LittleEndian.Uint64(body)
		if hash != KeyHash(e.Key) || first && hash != h.first[i] || !first && compareEntries(prev, out[len(out)-1], hash, e) >= 0 {
			return nil, format.Corrupt(h.key, fmt.Sprintf("block %d: entry %d out of order or not under its key's hash", i, len(out)), nil)
		}
		prev = hash
		body = body[20+w+int(n):]
		out = append(out, e)
	}
	if want := min(HashBlock, h.entries-i*HashBlock); len(out) != want {
		return nil, format.Corrupt(h.key, fmt.Sprintf("block %d holds %d entries, want %d", i, len(out), want), nil)
	}
	return out, nil
}

// compareEntries is the order of a paged index's entries: by key hash
// (ha, hb: a's and b's), then key, fragment and offset.
func compareEntries(ha uint64, a HashEntry, hb uint64, b HashEntry) int {
	return cmp.Or(cmp.Compare(ha, hb), bytes.Compare(a.Key, b.Key),
		cmp.Compare(a.Fragment, b.Fragment), cmp.Compare(a.Offset, b.Offset))
}

// readRange reads n bytes of key from off.
func readRange(ctx context.Context, b blob.Bucket, key string, off, n int64) ([]byte, error) {
	r, err := b.NewRangeReader(ctx, key, off, n)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, err
	}
	if int64(len(data)) != n {
		return nil, format.Corrupt(key, fmt.Sprintf("%d bytes at %d, wanted %d: the object is shorter than its index entry says", len(data), off, n), nil)
	}
	return data, nil
}
