package table

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/table/evolve"
	"github.com/stratadb/strata/table/expr"
	"github.com/stratadb/strata/table/format"
	"github.com/stratadb/strata/table/value"
)

// KeySet is the set of keys (values of one or more key columns) of the
// rows of an upsert, with the range of each key column for pruning.
type KeySet struct {
	Columns []string
	keys    map[string]bool
	lo, hi  []value.Value
	single  []value.Value // the keys, when they are one column (for a key index)
}

// Len is the number of keys.
func (k *KeySet) Len() int { return len(k.keys) }

// NewKeySet reads the keys of batches (in schema) under the key columns
// cols. A key column must exist and hold integers, strings, binaries,
// booleans, dates or timestamps (a float's equality is not exact); a key
// must not be null, nor appear twice among the batches' rows. Each
// refusal is an *InputError naming the row and column.
func NewKeySet(schema *arrow.Schema, cols []string, batches []arrow.RecordBatch) (*KeySet, error) {
	return newKeySet(schema, cols, batches, true)
}

// KeysOf is NewKeySet of rows that were checked when they were written (a
// shard's generation of upserts): a row with a null key has none, and a
// key may appear more than once, rather than fail what must go on.
func KeysOf(schema *arrow.Schema, cols []string, batches []arrow.RecordBatch) (*KeySet, error) {
	return newKeySet(schema, cols, batches, false)
}

func newKeySet(schema *arrow.Schema, cols []string, batches []arrow.RecordBatch, strict bool) (*KeySet, error) {
	if len(cols) == 0 {
		return nil, &evolve.InputError{Row: -1, Reason: "an upsert needs at least one key column"}
	}
	ks := &KeySet{Columns: cols, keys: map[string]bool{}, lo: make([]value.Value, len(cols)), hi: make([]value.Value, len(cols))}
	idx := make([]int, len(cols))
	for i, c := range cols {
		if slices.Index(cols, c) != i {
			return nil, &evolve.InputError{Row: -1, Column: c, Reason: "the key column is named twice"}
		}
		fi := schema.FieldIndices(c)
		if len(fi) == 0 {
			return nil, &evolve.InputError{Row: -1, Column: c, Reason: "no such column to be a key"}
		}
		idx[i] = fi[0]
		switch k := value.KindOf(schema.Field(fi[0]).Type); k {
		case value.KindInt, value.KindUint, value.KindString, value.KindBytes, value.KindBool:
		default:
			return nil, &evolve.InputError{Row: -1, Column: c, Got: schema.Field(fi[0]).Type.String(),
				Reason: "a key column holds integers, strings, binaries, booleans, dates or timestamps"}
		}
	}
	row := int64(-1)
	var buf []byte
	for _, rec := range batches {
	rows:
		for r := range int(rec.NumRows()) {
			row++
			buf = buf[:0]
			for i, c := range idx {
				v, ok := format.ValueAt(rec.Column(c), r)
				if !ok && !strict {
					continue rows
				}
				if !ok {
					return nil, &evolve.InputError{Row: row, Column: cols[i], Reason: "a key must not be null"}
				}
				buf = appendKeyValue(buf, v)
				if len(cols) == 1 {
					ks.single = append(ks.single, v)
				}
				if len(ks.keys) == 0 || value.Compare(v, ks.lo[i]) < 0 {
					ks.lo[i] = v
				}
				if len(ks.keys) == 0 || value.Compare(v, ks.hi[i]) > 0 {
					ks.hi[i] = v
				}
			}
			if ks.keys[string(buf)] && strict {
				return nil, &evolve.InputError{Row: row, Column: cols[0], Reason: "the key appears twice among the rows of one upsert"}
			}
			ks.keys[string(buf)] = true
		}
	}
	return ks, nil
}

// appendRowKey appends the key of row r of the key columns cols (see
// appendKeyValue); false when one of its values is null.
func appendRowKey(buf []byte, cols []arrow.Array, r int) ([]byte, bool) {
	for _, c := range cols {
		v, ok := format.ValueAt(c, r)
		if !ok {
			return buf, false
		}
		buf = appendKeyValue(buf, v)
	}
	return buf, true
}

// appendKeyValue appends v to a key's encoding: its kind, then its value,
// strings and binaries with their length first.
func appendKeyValue(buf []byte, v value.Value) []byte {
	buf = append(buf, byte(v.Kind))
	switch v.Kind {
	case value.KindInt:
		return binary.BigEndian.AppendUint64(buf, uint64(v.I))
	case value.KindUint:
		return binary.BigEndian.AppendUint64(buf, v.U)
	case value.KindFloat:
		return binary.BigEndian.AppendUint64(buf, math.Float64bits(v.F))
	case value.KindString:
		buf = binary.AppendUvarint(buf, uint64(len(v.S)))
		return append(buf, v.S...)
	case value.KindBytes:
		buf = binary.AppendUvarint(buf, uint64(len(v.X)))
		return append(buf, v.X...)
	case value.KindBool:
		if v.B {
			return append(buf, 1)
		}
		return append(buf, 0)
	}
	return buf
}

// RowsWithKeys finds the live rows of s whose key is in ks and returns,
// for each fragment that holds one, its whole new deletion vector: the
// rows deleted before and those (sorted), as MatchingRows does; reads go
// parallelism at once (0: the scan's default).
func (s *Snapshot) RowsWithKeys(ctx context.Context, ks *KeySet, parallelism int) (map[uint64][]uint32, error) {
	raw, err := s.KeyRows(ctx, ks, parallelism, nil)
	if err != nil {
		return nil, err
	}
	return s.LiveDeletions(ctx, raw, parallelism)
}

// KeyRows finds the rows of s whose key is in ks, deleted or not, by
// fragment id: through a key index on the key column where there is one
// (every entry of a key), and by scanning the key columns of the other
// fragments whose statistics allow a key of ks. With only not nil, it
// looks in those fragments alone, by scanning. A fragment never changes,
// so what it finds in one holds in every version that has it.
func (s *Snapshot) KeyRows(ctx context.Context, ks *KeySet, parallelism int, only []uint64) (map[uint64][]uint32, error) {
	if ks.Len() == 0 || only != nil && len(only) == 0 {
		return map[uint64][]uint32{}, nil
	}
	var prune []expr.Predicate
	for i, c := range ks.Columns {
		prune = append(prune, expr.Ge(c, ks.lo[i]), expr.Le(c, ks.hi[i]))
	}
	bound, err := expr.Bind(expr.And(prune...), s.m.Schema())
	if err != nil {
		return nil, fmt.Errorf("table: upsert keys: %w", err)
	}
	found := map[uint64][]uint32{}
	scan := ScanOptions{Columns: ks.Columns, Filter: bound, WithRowAddress: true, Parallelism: parallelism, Fragments: only}
	if ix := s.m.IndexOn(ks.Columns[0]); ix != nil && len(ks.single) > 0 && only == nil {
		// A key index on the key column: the rows it knows are found
		// through it (every row of a key: an upsert replaces them all),
		// and the fragments it does not cover are scanned.
		addrs, ok, err := s.indexAddrs(ctx, ix, ks.single)
		if err != nil {
			return nil, err
		}
		if ok {
			if found, _, err = s.resolveKeys(ctx, addrs); err != nil {
				return nil, err
			}
			if scan.Fragments = s.unindexed(ix); len(scan.Fragments) == 0 {
				return found, nil
			}
		}
	}
	// Fragments whose keys this process wrote are looked in from memory.
	if scan.Fragments = s.fromKeyCache(ks, scan.Fragments, found); len(scan.Fragments) == 0 {
		return found, nil
	}
	var buf []byte
	for rec, err := range s.Scan(ctx, scan) {
		if err != nil {
			return nil, err
		}
		n := len(ks.Columns)
		frags := rec.Column(n).(*array.Uint64)
		offs := rec.Column(n + 1).(*array.Uint32)
		cols := rec.Columns()[:n]
		for r := range int(rec.NumRows()) {
			var ok bool
			if buf, ok = appendRowKey(buf[:0], cols, r); ok && ks.keys[string(buf)] {
				found[frags.Value(r)] = append(found[frags.Value(r)], offs.Value(r))
			}
		}
	}
	return found, nil
}

// LiveDeletions is NewDeletions without the fragments whose vector it
// leaves as it was (rows found that were deleted already).
func (s *Snapshot) LiveDeletions(ctx context.Context, found map[uint64][]uint32, parallelism int) (map[uint64][]uint32, error) {
	found, err := s.NewDeletions(ctx, found, parallelism)
	if err != nil {
		return nil, err
	}
	for id, rows := range found {
		if f := s.m.Fragment(id); f.Deletion != nil && int64(len(rows)) == f.Deletion.Count {
			delete(found, id)
		}
	}
	return found, nil
}

// KeysWritten is the key set (columns names, by the table's current
// names) of every row of frags, their deletion vectors left aside: the
// keys the keyed commit that added them wrote. Read leniently, as KeysOf.
func KeysWritten(ctx context.Context, b blob.Bucket, schema *arrow.Schema, names []string, frags []format.Fragment) (*KeySet, error) {
	whole := make([]format.Fragment, len(frags))
	copy(whole, frags)
	for i := range whole {
		whole[i].Deletion = nil
	}
	var batches []arrow.RecordBatch
	defer func() {
		for _, rec := range batches {
			rec.Release()
		}
	}()
	for rec, err := range SnapshotOf(b, schema, whole).Scan(ctx, ScanOptions{Parallelism: 1}) {
		if err != nil {
			return nil, err
		}
		rec.Retain()
		batches = append(batches, rec)
	}
	return KeysOf(schema, names, batches)
}

// RowKey is the key of row r of the key columns cols, as a KeySet holds
// it; false when one of its values is null.
func RowKey(cols []arrow.Array, r int) (string, bool) {
	buf, ok := appendRowKey(nil, cols, r)
	return string(buf), ok
}
