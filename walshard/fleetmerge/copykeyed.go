package fleetmerge

import (
	"context"
	"fmt"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/table"
	"github.com/stratadb/strata/table/format"
	"github.com/stratadb/strata/table/fragment"
	"github.com/stratadb/strata/walshard/wal"
)

// Merging a generation of upserts by copy: its flush object's rows, but
// the named upserts another shard's copy installed already, and each
// key's last row when the generation holds a key more than once, go into
// a fragment of their own, which a merge by key installs
// (installKeyed, commit.Table.MergeKeyed).

// copyKeyed returns the objects of a generation of upserts as the table
// at base is to add them — a flush object's rows copied into a new
// fragment, in order — and the generation's named upserts (Generation.Named)
// as the copy holds them, each marked dropped when base records its name
// (format.Producers.DropNamed): a dropped one's rows are left out of the
// copy, and of the rows of a key the generation holds more than once
// (Generation.Repeats), the copy takes the last that is left.
func copyKeyed(ctx context.Context, b blob.Bucket, base *format.Manifest, part ShardPart) ([]format.Fragment, []format.NamedRows, *table.KeySet, error) {
	g := part.Gens[0]
	frags := g.Fragments()
	named := base.Producers.DropNamed(g.Named)
	if !slices.ContainsFunc(frags, func(f format.Fragment) bool { return wal.InFlush(f.Key) }) {
		return frags, named, nil, nil
	}
	rows, err := readFlushRows(ctx, b, base.Schema(), []ShardPart{{Shard: part.Shard, Gens: part.Gens[:1], data: part.data, rows: part.rows}}, 1)
	if err != nil {
		return nil, nil, nil, err
	}
	defer rows.release()
	out := make([]format.Fragment, 0, len(frags))
	var copied []arrow.RecordBatch // every row out holds, when all are copies
	for _, f := range frags {
		if !wal.InFlush(f.Key) {
			out = append(out, f)
			continue
		}
		batches, at, err := keyedCopyRows(ctx, base.Schema(), g, rows.of(f.Key), f.Key, named)
		if err != nil {
			return nil, nil, nil, err
		}
		defer fragment.ReleaseAll(batches)
		copied = append(copied, batches...)
		key := ""
		if slices.ContainsFunc(batches, func(r arrow.RecordBatch) bool { return r.NumRows() > 0 }) {
			frag, err := writeCopy(ctx, b, base.Schema(), part.Shard, g.Gen, part.Epoch, batches)
			if err != nil {
				return nil, nil, nil, fmt.Errorf("walshard: shard %q: writing the rows of flush object %q: %w", part.Shard, f.Key, err)
			}
			out = append(out, frag)
			key = frag.Key
		}
		for i := range named {
			if named[i].Fragment != f.Key {
				continue
			}
			// Where the copy holds what is left of the upsert's rows
			// (together: only rows before them, or of its own, are left
			// out).
			n := named[i]
			end := int64(len(at) - 1)
			from, to := at[min(max(n.Offset, 0), end)], at[min(max(n.Offset+n.Rows, 0), end)]
			named[i].Fragment, named[i].Offset, named[i].Rows = key, from, to-from
		}
	}
	return out, named, keysHeld(base.Schema(), g.Keys, frags, copied), nil
}

// keysHeld is the keys of a generation of upserts' rows, from the copies
// of its flush objects held in memory (batches), when its objects are all
// flush objects; nil when it has others (read back then), or its key
// columns are gone.
func keysHeld(schema *arrow.Schema, keys []string, frags []format.Fragment, batches []arrow.RecordBatch) *table.KeySet {
	if slices.ContainsFunc(frags, func(f format.Fragment) bool { return !wal.InFlush(f.Key) }) {
		return nil
	}
	names, ok := table.CurrentNames(schema, keys)
	if !ok {
		return nil
	}
	ks, err := table.KeysOf(schema, names, batches)
	if err != nil {
		return nil // read back, where the merge names the fault
	}
	return ks
}

// keyedCopyRows returns the rows of a generation of upserts' flush object
// (batches, key: its rows in order) that its merge copies: without the
// rows of the named upserts marked dropped, and, when the generation
// holds a key more than once (Repeats), each key's last row of those
// left; and, for each row offset of the object (and its end), how many
// rows the copy holds before it.
func keyedCopyRows(ctx context.Context, schema *arrow.Schema, g wal.Generation, batches []arrow.RecordBatch, key string, named []format.NamedRows) ([]arrow.RecordBatch, []int64, error) {
	var total int
	for _, rec := range batches {
		total += int(rec.NumRows())
	}
	keep := make([]bool, total) // the object's rows in order
	for r := range keep {
		keep[r] = true
	}
	for _, r := range format.DroppedRows(named)[key] {
		if int(r) < total {
			keep[r] = false
		}
	}
	if names, ok := table.CurrentNames(schema, g.Keys); g.Repeats && ok && len(names) > 0 {
		// Of the rows left, each key's last: a row dropped replaces
		// nothing.
		left, err := table.FilterBatches(ctx, nil, batches, splitRows(keep, batches))
		if err != nil {
			return nil, nil, err
		}
		last, _, err := table.LastOfEachKeyMask(names, left, nil)
		fragment.ReleaseAll(left)
		if err != nil {
			return nil, nil, err
		}
		flat, j := slices.Concat(last...), 0
		for r := range keep {
			if keep[r] {
				keep[r], j = flat[j], j+1
			}
		}
	}
	out, err := table.FilterBatches(ctx, nil, batches, splitRows(keep, batches))
	if err != nil {
		return nil, nil, err
	}
	return out, wal.HeldBefore(keep), nil
}

// splitRows cuts keep, a mark for each row of batches in order, into one
// for each batch.
func splitRows(keep []bool, batches []arrow.RecordBatch) [][]bool {
	out := make([][]bool, len(batches))
	var at int64
	for i, rec := range batches {
		out[i] = keep[at : at+rec.NumRows()]
		at += rec.NumRows()
	}
	return out
}
