package wal

import (
	"context"
	"iter"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/table"
	"github.com/stratadb/strata/table/format"
	"github.com/stratadb/strata/table/fragment"
)

// ScanFresh yields what a fresh read sees: the rows of base, then those of
// generations gens that base does not hold yet, then batches (rows in the
// WAL, not flushed; keys[i] are the key columns of batches[i] when it
// holds upserts). Upserts not merged yet hide the rows with their keys
// that come before them in that order (scanFreshKeyed), so that a fresh
// read shows one row per key, as the table will once they are merged.
//
// A named append stored by two shards (a retry that reached another
// server) is read once, as the merge will install it (dropNamedCopies);
// entries names the named appends among batches.
func ScanFresh(ctx context.Context, b blob.Bucket, schema *arrow.Schema, base *table.Snapshot, gens []Generation,
	batches []arrow.RecordBatch, keys [][]string, entries []EntryNames, opts table.ScanOptions, yield func(arrow.RecordBatch, error) bool) {
	drops, cut, cutKeys := dropNamedCopies(base, gens, batches, keys, entries)
	if cut != nil {
		defer fragment.ReleaseAll(cut)
		batches, keys = cut, cutKeys
	}
	keyed := slices.ContainsFunc(gens, func(g Generation) bool { return len(g.Keys) > 0 }) ||
		slices.ContainsFunc(keys, func(k []string) bool { return len(k) > 0 })
	if keyed {
		scanFreshKeyed(ctx, b, schema, base, gens, drops, batches, keys, opts, yield)
		return
	}
	var frags []format.Fragment
	for _, g := range gens {
		for _, f := range drops.fragments(g) {
			f.ID = uint64(len(frags))
			frags = append(frags, f)
		}
	}
	for _, part := range []iter.Seq2[arrow.RecordBatch, error]{
		base.Scan(ctx, opts),
		table.SnapshotOf(drops.bucket(b), schema, frags).Scan(ctx, opts),
		table.ScanBatches(ctx, schema, batches, opts),
	} {
		for rec, err := range part {
			if !yield(rec, err) || err != nil {
				return
			}
		}
	}
}

// freshPart is one part of a fresh read over upserts not merged: its
// rows, and the keys they replace by (nil: appended rows).
type freshPart struct {
	rows   func(table.ScanOptions) iter.Seq2[arrow.RecordBatch, error]
	filter *table.KeyFilter
}

// scanFreshKeyed is scanFresh over parts some of which hold upserts: each
// part's rows are read without those whose key a later part of upserts
// holds. Reading the keys of a generation of upserts costs a read of it.
func scanFreshKeyed(ctx context.Context, b blob.Bucket, schema *arrow.Schema, base *table.Snapshot, gens []Generation, drops *freshDrops,
	batches []arrow.RecordBatch, keys [][]string, opts table.ScanOptions, yield func(arrow.RecordBatch, error) bool) {
	parts := []freshPart{{rows: func(o table.ScanOptions) iter.Seq2[arrow.RecordBatch, error] { return base.Scan(ctx, o) }}}
	var extra []string // key columns a projection leaves out
	keyFilter := func(stored []string) *table.KeyFilter {
		names, ok := table.CurrentNames(schema, stored)
		if !ok || len(names) == 0 {
			return nil // a key column dropped since: the rows are appended rows now
		}
		for _, n := range names {
			if opts.Columns != nil && !slices.Contains(opts.Columns, n) && !slices.Contains(extra, n) {
				extra = append(extra, n)
			}
		}
		return table.NewKeyFilter(names)
	}
	for _, g := range gens {
		drops, err := drops.lastOfEachKey(ctx, b, schema, g, opts)
		if err != nil {
			yield(nil, err)
			return
		}
		frags := drops.fragments(g)
		for i := range frags {
			frags[i].ID = uint64(i)
		}
		snap := table.SnapshotOf(drops.bucket(b), schema, frags)
		p := freshPart{rows: func(o table.ScanOptions) iter.Seq2[arrow.RecordBatch, error] { return snap.Scan(ctx, o) }}
		if len(g.Keys) > 0 {
			if p.filter = keyFilter(g.Keys); p.filter != nil {
				for rec, err := range snap.Scan(ctx, table.ScanOptions{Columns: p.filter.Columns, Allocator: opts.Allocator, Parallelism: opts.Parallelism, Memory: opts.Memory}) {
					if err == nil {
						err = p.filter.Add(rec)
					}
					if err != nil {
						yield(nil, err)
						return
					}
				}
			}
		}
		parts = append(parts, p)
	}
	for i, rec := range batches {
		p := freshPart{rows: func(o table.ScanOptions) iter.Seq2[arrow.RecordBatch, error] {
			return table.ScanBatches(ctx, schema, []arrow.RecordBatch{rec}, o)
		}}
		if i < len(keys) && len(keys[i]) > 0 {
			if p.filter = keyFilter(keys[i]); p.filter != nil {
				if err := p.filter.Add(rec); err != nil {
					yield(nil, err)
					return
				}
			}
		}
		parts = append(parts, p)
	}
	o := opts
	if len(extra) > 0 {
		o.Columns = append(slices.Clone(opts.Columns), extra...)
	}
	for i, p := range parts {
		for rec, err := range p.rows(o) {
			if err != nil {
				yield(nil, err)
				return
			}
			out, err := hideReplaced(ctx, opts, rec, parts[i+1:], len(extra))
			if err != nil {
				yield(nil, err)
				return
			}
			more := yield(out, nil)
			out.Release()
			if !more {
				return
			}
		}
	}
}

// hideReplaced returns rec without the rows whose key a later part holds,
// and without the extra key columns read for that (the last extra).
func hideReplaced(ctx context.Context, opts table.ScanOptions, rec arrow.RecordBatch, later []freshPart, extra int) (arrow.RecordBatch, error) {
	rec.Retain()
	for _, p := range later {
		if p.filter == nil {
			continue
		}
		kept, err := p.filter.Without(ctx, opts.Allocator, rec)
		rec.Release()
		if err != nil {
			return nil, err
		}
		rec = kept
	}
	if extra == 0 {
		return rec, nil
	}
	defer rec.Release()
	n := int(rec.NumCols()) - extra
	sc := arrow.NewSchema(rec.Schema().Fields()[:n], nil)
	return array.NewRecordBatch(sc, rec.Columns()[:n], rec.NumRows()), nil
}
