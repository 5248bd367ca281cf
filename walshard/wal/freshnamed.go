package wal

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/table"
	"github.com/stratadb/strata/table/format"
	"github.com/stratadb/strata/table/fragment"
)

// Named appends in a fresh read.
//
// A named append sent again after its answer was lost may reach another
// shard (a retry through another server): both shards store it, and the
// merge, where the shards meet, installs the name once per table and
// deletes the other copy (format.NamedRows). A fresh read leaves out the
// same copies the merge will: the rows of a named append whose name the
// table records already, or an earlier part of the read holds (the
// flushed generations, then the WAL's rows, in the read's order). The
// generations' copies are left out by deletion vectors the read holds in
// memory; the WAL's by slicing their batches.

// EntryNames are the named appends of one WAL entry in a fresh read: its
// batches (first, and n of them) and its appends, whose offsets count
// the entry's rows.
type EntryNames struct {
	First, N int
	Appends  []AppendRecord
}

// freshDrops are the copies a fresh read leaves out: deletion vectors by
// fragment key, kept in memory under keys of their own.
type freshDrops struct {
	vectors map[string][]byte           // the vectors' bodies, by made-up key
	frags   map[string]*format.Deletion // by fragment key
	rows    map[string][]uint32         // the rows each fragment leaves out, by fragment key
}

// rowsOf is the rows fragment key leaves out (nil: none).
func (d *freshDrops) rowsOf(key string) []uint32 {
	if d == nil {
		return nil
	}
	return d.rows[key]
}

// fragments is g's fragments with the copies d leaves out deleted.
func (d *freshDrops) fragments(g Generation) []format.Fragment {
	out := g.Fragments()
	if d == nil {
		return out
	}
	for i := range out {
		out[i].Deletion = d.frags[out[i].Key]
	}
	return out
}

// bucket is b, with d's vectors read from memory.
func (d *freshDrops) bucket(b blob.Bucket) blob.Bucket {
	if d == nil || len(d.vectors) == 0 {
		return b
	}
	return vectorsIn{Bucket: b, vectors: d.vectors}
}

// vectorsIn is a bucket that answers some keys' reads from memory.
type vectorsIn struct {
	blob.Bucket
	vectors map[string][]byte
}

func (v vectorsIn) Get(ctx context.Context, key string) ([]byte, error) {
	if data, ok := v.vectors[key]; ok {
		return data, nil
	}
	return v.Bucket.Get(ctx, key)
}

// dropNamedCopies decides which named appends a fresh read over base,
// gens and batches (keys: each batch's key columns) leaves out: it
// returns the vectors for gens' copies, and batches without the WAL's
// copies with their keys (new batches the caller releases; nil when none
// is left out).
func dropNamedCopies(base *table.Snapshot, gens []Generation, batches []arrow.RecordBatch, keys [][]string, entries []EntryNames) (*freshDrops, []arrow.RecordBatch, [][]string) {
	var named []format.NamedRows
	for _, g := range gens {
		named = append(named, g.Named...)
	}
	walFrom := len(named)
	var entryOf []int // of each of named's WAL appends, its entry
	for i, e := range entries {
		for _, a := range e.Appends {
			if a.Offset == nil {
				continue // an older build's entry: its rows cannot be told apart
			}
			named = append(named, format.NamedRows{AppendKey: a.AppendKey, Offset: *a.Offset, Rows: a.Rows})
			entryOf = append(entryOf, i)
		}
	}
	if len(named) == 0 {
		return nil, nil, nil
	}
	named = base.Manifest().Producers.DropNamed(named)
	drops := map[string][]uint32{}
	cut := map[int][][2]int64{} // by entry: the row ranges to leave out
	for i, n := range named {
		switch {
		case !n.Dropped:
		case i < walFrom:
			for r := n.Offset; r < n.Offset+n.Rows; r++ {
				drops[n.Fragment] = append(drops[n.Fragment], uint32(r))
			}
		default:
			e := entryOf[i-walFrom]
			cut[e] = append(cut[e], [2]int64{n.Offset, n.Offset + n.Rows})
		}
	}
	d := (*freshDrops)(nil).with(drops)
	if len(cut) == 0 {
		return d, nil, nil
	}
	out, outKeys := cutBatches(batches, keys, entries, cut)
	return d, out, outKeys
}

// cutBatches returns batches without the row ranges cut leaves out of
// each entry (new batches: the caller releases them), with their keys.
func cutBatches(batches []arrow.RecordBatch, keys [][]string, entries []EntryNames, cut map[int][][2]int64) ([]arrow.RecordBatch, [][]string) {
	out := make([]arrow.RecordBatch, 0, len(batches))
	var outKeys [][]string
	keyOf := func(j int) []string {
		if j < len(keys) {
			return keys[j]
		}
		return nil
	}
	inEntry := make([]int, len(batches))
	at := make([]int64, len(batches)) // a batch's first row among its entry's
	for i := range inEntry {
		inEntry[i] = -1
	}
	for e, en := range entries {
		var rows int64
		for j := en.First; j < en.First+en.N; j++ {
			inEntry[j], at[j] = e, rows
			rows += batches[j].NumRows()
		}
	}
	for j, rec := range batches {
		ranges := cut[inEntry[j]]
		if inEntry[j] < 0 || len(ranges) == 0 {
			rec.Retain()
			out, outKeys = append(out, rec), append(outKeys, keyOf(j))
			continue
		}
		from, to := at[j], at[j]+rec.NumRows()
		for r := from; r < to; {
			end, skip := to, false
			for _, c := range ranges {
				switch {
				case c[0] <= r && r < c[1]:
					end, skip = min(c[1], to), true
				case r < c[0] && c[0] < end:
					end = c[0]
				}
				if skip {
					break
				}
			}
			if !skip {
				out, outKeys = append(out, rec.NewSlice(r-from, end-from)), append(outKeys, keyOf(j))
			}
			r = end
		}
	}
	return out, outKeys
}

// lastOfEachKey returns d with, for a generation of upserts whose object
// holds a key more than once (Generation.Repeats), the rows that a later
// row of their key replaces left out too — of the rows d leaves in, so
// that a named upsert d leaves out (a copy another shard stored) replaces
// nothing, as at its merge (copyKeyed). It reads the generation's key
// columns.
func (d *freshDrops) lastOfEachKey(ctx context.Context, b blob.Bucket, schema *arrow.Schema, g Generation, o table.ScanOptions) (*freshDrops, error) {
	names, ok := table.CurrentNames(schema, g.Keys)
	if !g.Repeats || !ok || len(names) == 0 {
		return d, nil
	}
	frags := d.fragments(g)
	for i := range frags {
		frags[i].ID = uint64(i)
	}
	var batches []arrow.RecordBatch
	defer func() { fragment.ReleaseAll(batches) }()
	for rec, err := range table.SnapshotOf(d.bucket(b), schema, frags).Scan(ctx, table.ScanOptions{Columns: names, WithRowAddress: true, Parallelism: 1, Allocator: o.Allocator}) {
		if err != nil {
			return nil, err
		}
		rec.Retain()
		batches = append(batches, rec)
	}
	keeps, _, err := table.LastOfEachKeyMask(names, batches, nil)
	if err != nil {
		return nil, err
	}
	replaced := map[string][]uint32{} // by fragment key
	for i, rec := range batches {
		fc := rec.Column(rec.Schema().FieldIndices(table.FragmentColumn)[0]).(*array.Uint64)
		oc := rec.Column(rec.Schema().FieldIndices(table.OffsetColumn)[0]).(*array.Uint32)
		for r, k := range keeps[i] {
			if !k {
				key := frags[fc.Value(r)].Key
				replaced[key] = append(replaced[key], oc.Value(r))
			}
		}
	}
	return d.with(replaced), nil
}

// with returns d with rows, by fragment key, left out too (d is not
// changed; nil: none left out yet).
func (d *freshDrops) with(rows map[string][]uint32) *freshDrops {
	if len(rows) == 0 {
		return d
	}
	out := &freshDrops{vectors: map[string][]byte{}, frags: map[string]*format.Deletion{}, rows: map[string][]uint32{}}
	if d != nil {
		maps.Copy(out.vectors, d.vectors)
		maps.Copy(out.frags, d.frags)
		maps.Copy(out.rows, d.rows)
	}
	for key, add := range rows {
		add = slices.Clone(add)
		if had := d.rowsOf(key); had != nil {
			add = append(add, had...)
		}
		slices.Sort(add)
		add = slices.Compact(add)
		vkey := fmt.Sprintf("fresh-read-deletions/%d", len(out.vectors))
		out.vectors[vkey] = format.EncodeDeletions(add)
		out.frags[key] = &format.Deletion{Key: vkey, Count: int64(len(add))}
		out.rows[key] = add
	}
	return out
}
