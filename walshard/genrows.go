package walshard

import (
	"context"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/stratadb/strata/internal/plant"
	"github.com/stratadb/strata/table"
	"github.com/stratadb/strata/table/format"
	"github.com/stratadb/strata/table/fragment"
	"github.com/stratadb/strata/walshard/wal"
)

// The rows a flush writes for a generation, and, for a generation of
// upserts, where its named upserts are.

// generationOf returns the rows of next's newest generation, made of
// rest (generationRows), and lists in it, for a generation of upserts, its
// named upserts and whether it holds a key more than once: named upserts
// are installed once per table, as named appends are, a retry that
// reached another shard being dropped by the merge that meets the name
// installed.
func generationOf(ctx context.Context, schema *arrow.Schema, next *wal.State, rest []memEntry) ([]arrow.RecordBatch, func(), error) {
	batches, kept, repeats, release, err := generationRows(ctx, schema, rest)
	if err != nil {
		return nil, nil, err
	}
	g := &next.Generations[len(next.Generations)-1]
	if len(g.Keys) > 0 && len(g.Parts) == 0 && kept != nil {
		g.Named, g.Repeats = keyedNamed(rest, kept, g.Key), repeats
	}
	return batches, release, nil
}

// namedRowsOf tells, for each row of entries' batches (by batch, in
// order), whether it is a named upsert's.
func namedRowsOf(entries []memEntry) [][]bool {
	var out [][]bool
	for _, me := range entries {
		var rows int64
		for _, rec := range me.batches {
			rows += rec.NumRows()
		}
		named := make([]bool, rows)
		for _, a := range me.appends {
			if a.Offset == nil {
				continue // an older build's entry: its rows cannot be told apart
			}
			for r := max(*a.Offset, 0); r < min(*a.Offset+a.Rows, rows); r++ {
				named[r] = true
			}
		}
		var at int64
		for _, rec := range me.batches {
			out = append(out, named[at:at+rec.NumRows()])
			at += rec.NumRows()
		}
	}
	return out
}

// keyedNamed lists where a generation of upserts holds its entries'
// named upserts in its flush object (key): the rows of each that no later
// upsert of the generation replaced, which stay together and in order
// (kept: for each of the entries' batches, in order, which rows the
// object holds). A named upsert all of whose rows were replaced is
// listed with none: its name is recorded all the same. An entry of an
// older build, whose named rows have no offset, is left out.
func keyedNamed(entries []memEntry, kept [][]bool, key string) []format.NamedRows {
	flat := slices.Concat(kept...) // the entries' rows in order: held by the object
	held := wal.HeldBefore(flat)
	var out []format.NamedRows
	var start int64 // the entry's first row among flat's
	for _, me := range entries {
		for _, a := range me.appends {
			if a.Offset == nil || start+*a.Offset+a.Rows > int64(len(flat)) {
				continue
			}
			from, to := start+*a.Offset, start+*a.Offset+a.Rows
			out = append(out, format.NamedRows{AppendKey: a.AppendKey, Fragment: key, Offset: held[from], Rows: held[to] - held[from]})
		}
		start += me.rows
	}
	return out
}

// generationRows returns the rows of entries as a generation holds them:
// of upserts, the last of each key, but that a named upsert leaves the
// rows of its key before it (a merge that drops it as a copy another
// shard stored keeps the last of those; see Generation.Repeats); with,
// for each of the entries' batches, which of its rows it kept (nil:
// every row), and whether a key keeps more than one row. release lets go
// of what it made.
func generationRows(ctx context.Context, schema *arrow.Schema, entries []memEntry) (_ []arrow.RecordBatch, kept [][]bool, repeats bool, release func(), err error) {
	var batches []arrow.RecordBatch
	for _, me := range entries {
		batches = append(batches, me.batches...)
	}
	if len(entries) == 0 {
		return nil, nil, false, func() {}, nil
	}
	names, ok := table.CurrentNames(schema, entries[0].keys)
	if !ok || len(names) == 0 {
		return batches, nil, false, func() {}, nil
	}
	// Upserts: a later one of a key replaces an earlier one.
	if plant.On(plant.FlushKeepsFirstUpsert) {
		batches = slices.Clone(batches)
		slices.Reverse(batches) // planted defect: the first one stays
		last, _, err := table.LastOfEachKey(ctx, nil, names, batches, nil)
		return last, nil, false, func() { fragment.ReleaseAll(last) }, err
	}
	named := namedRowsOf(entries)
	kept, repeats, err = table.LastOfEachKeyMask(names, batches, func(i, r int) bool { return !named[i][r] })
	if err != nil {
		return nil, nil, false, nil, err
	}
	last, err := table.FilterBatches(ctx, nil, batches, kept)
	if err != nil {
		return nil, nil, false, nil, err
	}
	return last, kept, repeats, func() { fragment.ReleaseAll(last) }, nil
}

// namedRows lists where a generation holds its entries' named appends:
// the rows of rest, in order, in the flush object flushKey; an entry
// reused as a part, in its own object. An entry of an older build, whose
// named rows have no offset, is left out: its rows are installed as they
// are.
func namedRows(entries, rest []memEntry, flushKey string) []format.NamedRows {
	var out []format.NamedRows
	var base int64 // the flush object's rows before the entry's
	for _, me := range entries {
		obj, from := flushKey, base
		if me.reuse != nil && !slices.ContainsFunc(rest, func(r memEntry) bool { return r.pos == me.pos }) {
			obj, from = me.reuse.Key, 0
		} else {
			base += me.rows
		}
		for _, a := range me.appends {
			if a.Offset == nil {
				continue
			}
			out = append(out, format.NamedRows{AppendKey: a.AppendKey, Fragment: obj, Offset: from + *a.Offset, Rows: a.Rows})
		}
	}
	return out
}
