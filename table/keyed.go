package table

import (
	"context"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/compute"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/stratadb/strata/table/evolve"
)

// CurrentNames are the names in sc of the columns stored as stored (see
// StoredName); ok is false when one of them is no longer in sc (dropped).
func CurrentNames(sc *arrow.Schema, stored []string) (names []string, ok bool) {
	names = make([]string, len(stored))
	for i, s := range stored {
		found := false
		for _, f := range sc.Fields() {
			if evolve.StoredName(f) == s {
				names[i], found = f.Name, true
				break
			}
		}
		if !found {
			return nil, false
		}
	}
	return names, true
}

// KeyFilter is a set of keys (of the key columns Columns) that rows can
// be kept out by: what a fresh read hides under later upserts of the same
// keys. Unlike a KeySet, a key may be added more than once.
type KeyFilter struct {
	Columns []string
	keys    map[string]bool
}

// NewKeyFilter is an empty filter of the key columns cols.
func NewKeyFilter(cols []string) *KeyFilter {
	return &KeyFilter{Columns: cols, keys: map[string]bool{}}
}

// Len is the number of keys in f.
func (f *KeyFilter) Len() int { return len(f.keys) }

// Add adds the keys of rec's rows (rows with a null key have none).
func (f *KeyFilter) Add(rec arrow.RecordBatch) error {
	cols, err := keyColumns(rec, f.Columns)
	if err != nil {
		return err
	}
	var buf []byte
	for r := range int(rec.NumRows()) {
		var ok bool
		if buf, ok = appendRowKey(buf[:0], cols, r); ok {
			f.keys[string(buf)] = true
		}
	}
	return nil
}

// Without returns rec without the rows whose key f holds (rec itself,
// retained, when none is); the caller releases it.
func (f *KeyFilter) Without(ctx context.Context, mem memory.Allocator, rec arrow.RecordBatch) (arrow.RecordBatch, error) {
	if len(f.keys) == 0 {
		rec.Retain()
		return rec, nil
	}
	cols, err := keyColumns(rec, f.Columns)
	if err != nil {
		return nil, err
	}
	keep := make([]bool, rec.NumRows())
	var buf []byte
	for r := range keep {
		var ok bool
		buf, ok = appendRowKey(buf[:0], cols, r)
		keep[r] = !ok || !f.keys[string(buf)]
	}
	return FilterRows(ctx, mem, rec, keep)
}

// LastOfEachKey keeps, of the rows of batches in order, the last row of
// each key (columns cols): what upserts of one shard become when they are
// flushed together, a later upsert of a key replacing an earlier one
// (LastOfEachKeyMask says which rows, and what replaces says). It returns
// new batches, one for each of batches (the caller releases them), and,
// for each, which of its rows it kept.
func LastOfEachKey(ctx context.Context, mem memory.Allocator, cols []string, batches []arrow.RecordBatch, replaces func(i, r int) bool) ([]arrow.RecordBatch, [][]bool, error) {
	keeps, _, err := LastOfEachKeyMask(cols, batches, replaces)
	if err != nil {
		return nil, nil, err
	}
	out, err := FilterBatches(ctx, mem, batches, keeps)
	return out, keeps, err
}

// FilterBatches returns, for each of batches, its rows that keeps marks
// (FilterRows); the caller releases them.
func FilterBatches(ctx context.Context, mem memory.Allocator, batches []arrow.RecordBatch, keeps [][]bool) ([]arrow.RecordBatch, error) {
	out := make([]arrow.RecordBatch, 0, len(batches))
	for i, rec := range batches {
		kept, err := FilterRows(ctx, mem, rec, keeps[i])
		if err != nil {
			for _, o := range out {
				o.Release()
			}
			return nil, err
		}
		out = append(out, kept)
	}
	return out, nil
}

// LastOfEachKeyMask tells, for each row of batches (in order), whether it
// is the last of its key (columns cols) — a row without a key (a null in
// a key column) always is — and whether a key keeps more than one row.
// replaces, when not nil, says whether row r of batch i replaces the
// rows of its key before it: one that does not (a named upsert, which a
// merge may drop as a copy another shard stored) leaves them, and the
// key keeps them too, up to the one before it that replaces.
func LastOfEachKeyMask(cols []string, batches []arrow.RecordBatch, replaces func(i, r int) bool) (keeps [][]bool, repeats bool, err error) {
	replaced := map[string]bool{} // a later row of the key replaces
	seen := map[string]bool{}     // a later row of the key is kept
	keeps = make([][]bool, len(batches))
	var buf []byte
	for i := len(batches) - 1; i >= 0; i-- {
		kc, err := keyColumns(batches[i], cols)
		if err != nil {
			return nil, false, err
		}
		keeps[i] = make([]bool, batches[i].NumRows())
		for r := len(keeps[i]) - 1; r >= 0; r-- {
			var ok bool
			buf, ok = appendRowKey(buf[:0], kc, r)
			keeps[i][r] = !ok || !replaced[string(buf)]
			if !ok {
				continue
			}
			if keeps[i][r] && seen[string(buf)] {
				repeats = true
			}
			seen[string(buf)] = true
			if replaces == nil || replaces(i, r) {
				replaced[string(buf)] = true
			}
		}
	}
	return keeps, repeats, nil
}

func keyColumns(rec arrow.RecordBatch, names []string) ([]arrow.Array, error) {
	cols := make([]arrow.Array, len(names))
	for i, n := range names {
		fi := rec.Schema().FieldIndices(n)
		if len(fi) != 1 {
			return nil, fmt.Errorf("table: rows without the key column %q", n)
		}
		cols[i] = rec.Column(fi[0])
	}
	return cols, nil
}

// FilterRows returns the rows of rec that keep marks (rec itself,
// retained, when it marks them all).
func FilterRows(ctx context.Context, mem memory.Allocator, rec arrow.RecordBatch, keep []bool) (arrow.RecordBatch, error) {
	all := true
	for _, k := range keep {
		all = all && k
	}
	if all {
		rec.Retain()
		return rec, nil
	}
	if mem == nil {
		mem = memory.DefaultAllocator
	}
	mb := array.NewBooleanBuilder(mem)
	mb.AppendValues(keep, nil)
	mask := mb.NewArray()
	mb.Release()
	defer mask.Release()
	return compute.FilterRecordBatch(compute.WithAllocator(ctx, mem), rec, mask, compute.DefaultFilterOptions())
}
