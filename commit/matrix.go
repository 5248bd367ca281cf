package commit

import (
	"slices"

	"github.com/stratadb/strata/internal/plant"
	"github.com/stratadb/strata/table/format"
	"github.com/stratadb/strata/table/value"
)

// Decision is the conflict matrix's verdict on our transaction against one
// that landed after our read version.
type Decision int

const (
	// Compatible: rebase onto the newer version and try again.
	Compatible Decision = iota
	// Retry: ours must be planned again against the newer version (it
	// touched fragments theirs changed); the caller may re-plan.
	Retry
	// Conflict: ours cannot proceed.
	Conflict
	// Done: theirs already did what ours would (a merge of our shard up to
	// our watermark); ours is complete without committing.
	Done
)

func (d Decision) String() string {
	return [...]string{"compatible", "retry", "conflict", "done"}[d]
}

// Check is the conflict matrix of docs/format.md, as a pure function:
// ours is the transaction being committed, theirs one that landed after
// ours was planned.
//
//	ours \ theirs | Append | Merge(shard)               | Delete        | Rewrite       | Overwrite
//	Append        | ok     | ok                         | ok            | ok            | conflict
//	Merge(shard)  | ok     | other: ok; same: done if   | ok            | ok            | conflict
//	              |        | covered, else retry (an    |               |               |
//	              |        | owner's) or trim (a fleet) |               |               |
//	Delete        | ok     | ok                         | retry overlap | retry overlap | conflict
//	Rewrite       | ok     | ok                         | retry overlap | retry overlap | conflict
//	Overwrite     | ok     | ok                         | ok            | ok            | retry
//	Upsert        | retry  | retry if its rows may hold | retry overlap | retry overlap | conflict
//	              | keys   | our keys                   |               |               |
//	Merge(keyed)  | as Merge(shard) first, then as Upsert                              | conflict
//	Update        | ok     | ok                         | retry overlap | retry overlap | conflict
//	Alter         | ok     | ok                         | ok            | ok            | conflict
//
// Against an Alter that landed first (theirs), an Append, Merge, Delete,
// Rewrite and a restore go on: what they wrote under the schema before is
// read by stored name. An Alter, Upsert, Update, CreateIndex or an
// Overwrite of rows plans again: they name columns, which the Alter may
// have renamed or dropped, and an overwrite records the schema it keeps.
// An Append that holds values (not only nulls) in a column the Alter
// dropped conflicts: its rows would be acknowledged without them. (A
// shard's rows were acknowledged when they reached the WAL, before the
// drop: its Merge goes on.)
//
// A theirs Upsert or Update is, for every other row, a Delete (its deletion
// vectors) and an Append (its rows): Delete and Rewrite retry on a common fragment,
// Append, Merge and Overwrite go on; an Upsert after an Upsert retries on
// a common fragment or when the rows it added may hold our keys ("retry
// keys": their key columns' statistics meet the range of ours).
//
// An Upsert that deletes the rows its source lacks (DeletesUnmatched, an
// upsert with that clause) retries after any commit that adds rows but a
// Rewrite: they may be rows it must delete. An upsert with clauses checks
// rows that land against the range of all its keys (KeyRange), not only
// those it writes, and retries after a Delete, Update or Upsert of a
// fragment holding rows it matched and left (Read).
//
// A Merge(keyed) installs a shard's generation of upserts (a merge with
// Keys and Deletions, Table.MergeKeyed): against theirs it is a merge of
// its shard (done when covered, retry when its own shard moved below it),
// and otherwise an Upsert; to the others it is an Upsert.
//
// A restore (Table.Restore) is an Overwrite.
//
// An undo (a Rewrite with undoes: it gives fragments back the vectors they
// had before the commit it takes back, or copies of them when a compaction
// rewrote them since) makes a Delete, Update, Upsert and Merge(keyed) plan
// again: rows they passed over as deleted are live again, and may match
// them.
//
// CreateIndex retries after any Delete or Rewrite (it read every fragment),
// and a Rewrite retries after a CreateIndex (so that it records where it
// moves the indexed rows). Delete against Delete retries on a common
// fragment even when the rows differ: the re-plan merges the two vectors.
func Check(ours, theirs *format.Transaction) Decision {
	if theirs.Kind == format.KindCreate {
		return Compatible
	}
	if theirs.Kind == format.KindAlter {
		// Rows and deletions planned under the schema before stay well
		// defined (fragments are read by stored name); what names columns
		// plans again under the new schema.
		switch ours.Kind {
		case format.KindAlter, format.KindUpsert, format.KindUpdate, format.KindCreateIndex:
			return Retry
		case format.KindOverwrite:
			if ours.Restores == 0 {
				return Retry // an overwrite's rows are conformed again under the new schema
			}
		case format.KindMerge:
			if len(ours.Keys) > 0 {
				return Retry // a shard's upserts name their key columns
			}
		case format.KindAppend:
			if writesDropped(ours.Added, theirs.Dropped) {
				return Conflict // its values in a dropped column would be lost
			}
		}
		return Compatible
	}
	if theirs.Kind == format.KindOverwrite {
		if ours.Kind == format.KindOverwrite {
			return Retry
		}
		return Conflict
	}
	switch ours.Kind {
	case format.KindAppend:
		return Compatible
	case format.KindMerge:
		if d := mergeAgainst(ours, theirs); d != Compatible || len(ours.Keys) == 0 {
			return d
		}
		return upsertAgainst(ours, theirs) // a merge of a shard's upserts
	case format.KindDelete, format.KindUpdate:
		if givesRowsBack(theirs) {
			return Retry // rows ours passed over as deleted may match it
		}
		switch theirs.Kind {
		case format.KindDelete, format.KindRewrite, format.KindUpsert, format.KindUpdate, format.KindMerge:
			if overlap(ours.Touched(), theirs.Touched()) {
				return Retry
			}
		}
		return Compatible
	case format.KindUpsert:
		return upsertAgainst(ours, theirs)
	case format.KindRewrite:
		switch theirs.Kind {
		case format.KindDelete, format.KindRewrite, format.KindUpsert, format.KindUpdate, format.KindMerge:
			if overlap(ours.Touched(), theirs.Touched()) && !(theirs.Kind == format.KindDelete && plant.On(plant.RewriteOverDelete)) {
				return Retry
			}
		case format.KindCreateIndex:
			return Retry // plan again, recording remap entries for the new index
		}
		return Compatible
	case format.KindCreateIndex:
		switch theirs.Kind {
		case format.KindDelete, format.KindRewrite, format.KindUpsert, format.KindUpdate:
			return Retry // the index was built from fragments that changed
		case format.KindMerge:
			if len(theirs.Deletions) > 0 {
				return Retry
			}
		}
		return Compatible
	case format.KindOverwrite, format.KindAlter:
		return Compatible
	}
	return Conflict
}

// givesRowsBack says whether theirs is an undo (a Rewrite that takes a
// commit back), which may give rows back: by giving fragments the vectors
// they had before, or, when a compaction rewrote a fragment since, as a
// copy of it in a fragment of its own. Rows a delete, update or upsert
// planned before it passed over as deleted may be live again. A
// compaction takes nothing back, and has no deletions.
func givesRowsBack(theirs *format.Transaction) bool {
	return theirs.Kind == format.KindRewrite && (theirs.Undoes != 0 || len(theirs.Deletions) > 0)
}

// mergeAgainst is the matrix's row of a merge of shards (ours) against
// theirs.
func mergeAgainst(ours, theirs *format.Transaction) Decision {
	if theirs.Kind != format.KindMerge {
		return Compatible
	}
	covered, overlap := true, false
	for _, o := range ours.MergedShards() {
		t, ok := mergedTo(theirs, o.Shard)
		if !ok || t < o.Watermark {
			covered = false
		}
		overlap = overlap || ok
	}
	switch {
	case covered:
		return Done
	case overlap && (len(ours.Merges) == 0 || ours.Whole):
		return Retry // an owner's merge, or one of copies, plans again from the new watermark
	}
	return Compatible // a fleet merge is trimmed when applied (Apply)
}

// upsertAgainst is the matrix's row of an upsert (ours: a direct one, or
// a merge of a shard's upserts) against theirs.
func upsertAgainst(ours, theirs *format.Transaction) Decision {
	if givesRowsBack(theirs) {
		return Retry // rows ours passed over as deleted may hold its keys
	}
	if ours.DeletesUnmatched && len(theirs.Added) > 0 && theirs.Kind != format.KindRewrite {
		return Retry // rows ours did not see, which it may have had to delete
	}
	if theirs.Kind != format.KindRewrite && overlap(ours.Read, theirs.Touched()) {
		return Retry // rows ours matched and left changed
	}
	switch theirs.Kind {
	case format.KindDelete, format.KindRewrite:
		if overlap(ours.Touched(), theirs.Touched()) {
			return Retry
		}
	case format.KindAppend, format.KindMerge, format.KindUpsert, format.KindUpdate:
		// Rows landed that may carry our keys: planned again, the
		// upsert replaces them too, so a key keeps one row.
		if overlap(ours.Touched(), theirs.Touched()) || mayHoldKeys(ours, theirs.Added) && !plant.On(plant.UpsertIgnoresLandedKeys) {
			return Retry
		}
	}
	return Compatible
}

// mergedTo returns the watermark a merge moved shard to.
func mergedTo(t *format.Transaction, shard string) (uint64, bool) {
	for _, m := range t.MergedShards() {
		if m.Shard == shard {
			return m.Watermark, true
		}
	}
	return 0, false
}

// mayHoldKeys tells whether a fragment of added may hold a key of the
// upsert ours: for every key column, its range of values meets the
// range of the upsert's own rows. Statistics missing (a long string, an
// unsupported type) count as "may".
func mayHoldKeys(ours *format.Transaction, added []format.Fragment) bool {
	for i := range added {
		disjoint := false
		for _, k := range ours.Keys {
			lo, hi, ok := keyRange(ours.Added, k)
			if r := columnStatsIn(ours.KeyRange, k); r != nil && r.Min != nil && r.Max != nil {
				lo, hi, ok = *r.Min, *r.Max, true // every row of an upsert with clauses, written or not
			}
			st := columnStats(&added[i], k)
			if !ok || st == nil || st.Min == nil || st.Max == nil || st.Min.Kind != lo.Kind {
				continue // unknown: may meet
			}
			if value.Compare(*st.Max, lo) < 0 || value.Compare(*st.Min, hi) > 0 {
				disjoint = true
				break
			}
		}
		if !disjoint {
			return true
		}
	}
	return false
}

// keyRange is the range of column k over frags' statistics.
func keyRange(frags []format.Fragment, k string) (lo, hi value.Value, ok bool) {
	for i := range frags {
		st := columnStats(&frags[i], k)
		if st == nil || st.Min == nil || st.Max == nil {
			return lo, hi, false
		}
		if !ok || value.Compare(*st.Min, lo) < 0 {
			lo = *st.Min
		}
		if !ok || value.Compare(*st.Max, hi) > 0 {
			hi = *st.Max
		}
		ok = true
	}
	return lo, hi, ok
}

func columnStats(f *format.Fragment, name string) *format.ColumnStats {
	return columnStatsIn(f.Columns, name)
}

func columnStatsIn(cols []format.ColumnStats, name string) *format.ColumnStats {
	for i := range cols {
		if cols[i].Name == name {
			return &cols[i]
		}
	}
	return nil
}

func overlap(a, b []uint64) bool {
	for _, x := range a {
		if _, ok := slices.BinarySearch(b, x); ok {
			return true
		}
	}
	return false
}

// writesDropped tells whether fragments added hold a value in a column
// stored under one of the names dropped.
func writesDropped(added []format.Fragment, dropped []string) bool {
	for i := range added {
		for _, d := range dropped {
			if st := columnStats(&added[i], d); st != nil && st.Nulls < added[i].Rows {
				return true
			}
		}
	}
	return false
}
