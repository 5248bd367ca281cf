package table

import (
	"strings"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/stratadb/strata/table/evolve"
	"github.com/stratadb/strata/table/format"
)

// keyCache holds the keys of fragments this process wrote as upserts,
// row by row, by fragment object (immutable; its key is unique to it) and
// key columns (stored names): an upsert that comes back to keys it wrote
// finds them in its own earlier fragments, which no key index covers yet,
// without reading them. Bounded by rows held; it starts afresh when full.
var keyCache struct {
	sync.Mutex
	m    map[keyCacheKey][]string
	rows int
}

type keyCacheKey struct{ object, columns string }

const keyCacheRows = 2 << 20

// RememberKeys records the keys, under columns cols of schema sc, of the
// rows of batches, which fragment object key holds in that order.
func RememberKeys(key string, sc *arrow.Schema, cols []string, batches []arrow.RecordBatch) {
	idx := make([]int, len(cols))
	for i, c := range cols {
		fi := sc.FieldIndices(c)
		if len(fi) != 1 {
			return
		}
		idx[i] = fi[0]
	}
	var keys []string
	var buf []byte
	for _, rec := range batches {
		cols := make([]arrow.Array, len(idx))
		for i, c := range idx {
			cols[i] = rec.Column(c)
		}
		for r := range int(rec.NumRows()) {
			var ok bool
			if buf, ok = appendRowKey(buf[:0], cols, r); !ok {
				return // a null key: not an upsert's rows
			}
			keys = append(keys, string(buf))
		}
	}
	if len(keys) > keyCacheRows/4 {
		return
	}
	k := keyCacheKey{key, strings.Join(evolve.StoredNames(sc, cols), "\x00")}
	keyCache.Lock()
	defer keyCache.Unlock()
	if keyCache.m == nil || keyCache.rows+len(keys) > keyCacheRows {
		keyCache.m, keyCache.rows = map[keyCacheKey][]string{}, 0
	}
	keyCache.m[k] = keys
	keyCache.rows += len(keys)
}

// fromKeyCache finds the rows with a key of ks in the fragments of ids
// (nil: every fragment) whose keys keyCache holds, deleted or not, adding
// them to found; it returns the ids of the fragments it could not look in
// (never nil).
func (s *Snapshot) fromKeyCache(ks *KeySet, ids []uint64, found map[uint64][]uint32) []uint64 {
	cols := strings.Join(evolve.StoredNames(s.m.Schema(), ks.Columns), "\x00")
	rest := []uint64{}
	look := func(f *format.Fragment) {
		if f.LiveRows() == 0 {
			return
		}
		keyCache.Lock()
		keys, ok := keyCache.m[keyCacheKey{f.Key, cols}]
		keyCache.Unlock()
		if !ok || int64(len(keys)) != f.Rows {
			rest = append(rest, f.ID)
			return
		}
		for off, k := range keys {
			if ks.keys[k] {
				found[f.ID] = append(found[f.ID], uint32(off))
			}
		}
	}
	if ids == nil {
		for i := range s.m.Fragments {
			look(&s.m.Fragments[i])
		}
		return rest
	}
	for _, id := range ids {
		if f := s.m.Fragment(id); f != nil {
			look(f)
		}
	}
	return rest
}
