package table

import (
	"context"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/stratadb/strata/table/expr"
	"github.com/stratadb/strata/table/value"
)

// TakeResult says how Take found its rows.
type TakeResult struct {
	FromIndex    int // keys resolved through the index
	ScannedFrags int // fragments the index does not cover, scanned with statistics pruning
	// Held is what TakeWith reserved of ScanOptions.Hold for the batches
	// it returns: the caller releases it once done with them.
	Held int64
}

// Take returns the live rows whose column col equals one of keys, with
// the columns asked for (nil: all). A key is a value of the column's kind
// (value.KindOf): an integer, a string, a binary or a boolean; a string
// stands for a binary and a non-negative integer for an unsigned one. A
// key index is meant for unique keys (an id): a key the index resolves is
// not looked for elsewhere. With a key index on col
// it reads only the row groups that hold the rows (ranged reads of their
// column chunks), translating addresses through the remap entries of
// later Rewrites. Rows the index does not give are found in two steps:
// a scan of col alone in the fragments its statistics do not rule out,
// which gives their addresses, then a read of those rows' row groups.
// The caller releases the batches.
func (s *Snapshot) Take(ctx context.Context, col string, keys []value.Value, columns []string) ([]arrow.RecordBatch, TakeResult, error) {
	return s.TakeWith(ctx, col, keys, ScanOptions{Columns: columns})
}

// TakeWith is Take with the scans it makes shaped by opts: the columns
// they read, their Memory budget, parallelism, read-ahead, batch size and
// allocator. Its filter, fragments and row addresses do not apply. With
// opts.Hold set, each batch it keeps for the answer is reserved from it
// first (a key may match many rows): a reservation refused ends the take
// with that error, nothing kept; TakeResult.Held says what to release.
func (s *Snapshot) TakeWith(ctx context.Context, col string, keys []value.Value, opts ScanOptions) (_ []arrow.RecordBatch, res TakeResult, err error) {
	columns := opts.Columns
	scan := func(o ScanOptions) ScanOptions {
		o.Memory, o.Parallelism, o.ReadAheadBytes, o.BatchSize, o.Allocator = opts.Memory, opts.Parallelism, opts.ReadAheadBytes, opts.BatchSize, opts.Allocator
		return o
	}
	// The keys as the column holds them: a key of another kind is an
	// error here, before anything is read.
	in, err := expr.Bind(expr.In(col, keys...), s.m.Schema())
	if err != nil {
		return nil, res, err
	}
	// Bound, the keys are in order: each is looked for once.
	keys = slices.CompactFunc(in.(expr.InSet).Values, func(a, b value.Value) bool { return value.Compare(a, b) == 0 })
	// The rows' addresses: through the index, for the keys it resolves
	// (a key index is for keys that are unique, such as ids: a key it
	// resolves is not looked for again), then by the key column of the
	// fragments it does not cover; then the rows, in one read.
	want := map[uint64][]uint32{}
	rest, fragments := keys, []uint64(nil)
	if ix := s.m.IndexOn(col); ix != nil {
		var addrs [][]addr
		var ok bool
		if addrs, ok, err = s.indexAddrs(ctx, ix, keys); err != nil {
			return nil, res, err
		}
		if ok {
			var found []bool
			if want, found, err = s.resolveKeys(ctx, addrs); err != nil {
				return nil, res, err
			}
			for _, offs := range want {
				res.FromIndex += len(offs)
			}
			rest = nil
			for i, k := range keys {
				if !found[i] {
					rest = append(rest, k)
				}
			}
			if fragments = s.unindexed(ix); len(fragments) == 0 {
				rest = nil
			}
			res.ScannedFrags = len(fragments)
		}
	}
	if len(rest) > 0 {
		var located map[uint64][]uint32
		if located, err = s.locate(ctx, col, rest, fragments, scan); err != nil {
			return nil, res, err
		}
		for f, offs := range located {
			want[f] = append(want[f], offs...)
		}
	}
	if len(want) == 0 {
		return nil, res, nil
	}
	var out []arrow.RecordBatch
	defer func() {
		if err != nil {
			for _, rec := range out {
				rec.Release()
			}
			if opts.Hold != nil && res.Held > 0 {
				opts.Hold.Release(res.Held)
			}
			res.Held = 0
		}
	}()
	read := scan(ScanOptions{Columns: columns, rows: want})
	if opts.Parallelism <= 0 && opts.Memory == nil {
		// Each fragment gives a row group or a few of the rows asked
		// for: all are read at once, one round trip.
		read.Parallelism = max(min(len(want), takeParallelism), DefaultParallelism)
	}
	for rec, err := range s.Scan(ctx, read) {
		if err != nil {
			return nil, res, err
		}
		if opts.Hold != nil {
			n := BatchBytes(rec)
			if err := opts.Hold.Reserve(ctx, n); err != nil {
				return nil, res, err
			}
			res.Held += n
		}
		rec.Retain()
		out = append(out, rec)
	}
	return out, res, nil
}

// takeParallelism: fragments a take reads its rows from at once, when
// its caller sets no parallelism and no memory budget.
const takeParallelism = 128

// locate returns the addresses of the live rows whose column col holds
// one of keys, in fragments (nil: all), reading col alone: each fragment
// its statistics do not rule out costs its footer and col's chunks, one
// round trip.
func (s *Snapshot) locate(ctx context.Context, col string, keys []value.Value, fragments []uint64, scan func(ScanOptions) ScanOptions) (map[uint64][]uint32, error) {
	want := map[uint64][]uint32{}
	opts := scan(ScanOptions{Columns: []string{col}, Filter: expr.In(col, keys...), Fragments: fragments, WithRowAddress: true})
	opts.Allocator = nil // addresses only: nothing the caller keeps
	for rec, err := range s.Scan(ctx, opts) {
		if err != nil {
			return nil, err
		}
		frags := rec.Column(1).(*array.Uint64)
		offs := rec.Column(2).(*array.Uint32)
		for i := range frags.Len() {
			want[frags.Value(i)] = append(want[frags.Value(i)], offs.Value(i))
		}
	}
	return want, nil
}

func allInts(keys []value.Value) bool {
	for _, k := range keys {
		if k.Kind != value.KindInt {
			return false
		}
	}
	return true
}

// BatchBytes is what rec's buffers hold.
func BatchBytes(rec arrow.RecordBatch) int64 {
	var n int64
	for _, col := range rec.Columns() {
		n += int64(col.Data().SizeInBytes())
	}
	return n
}
