package commit

import (
	"slices"

	"github.com/stratadb/strata/internal/plant"
	"github.com/stratadb/strata/table"
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
//
// A restore (Table.Restore) is an Overwrite.
//
// CreateIndex retries after any Delete or Rewrite (it read every fragment),
// and a Rewrite retries after a CreateIndex (so that it records where it
// moves the indexed rows). Delete against Delete retries on a common
// fragment even when the rows differ: the re-plan merges the two vectors.
func Check(ours, theirs *table.Transaction) Decision {
	if theirs.Kind == table.KindCreate {
		return Compatible
	}
	if theirs.Kind == table.KindOverwrite {
		if ours.Kind == table.KindOverwrite {
			return Retry
		}
		return Conflict
	}
	switch ours.Kind {
	case table.KindAppend:
		return Compatible
	case table.KindMerge:
		if theirs.Kind != table.KindMerge {
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
		case overlap && len(ours.Merges) == 0:
			return Retry // an owner's merge plans again from the new watermark
		}
		return Compatible // a fleet merge is trimmed when applied (Apply)
	case table.KindDelete:
		switch theirs.Kind {
		case table.KindDelete, table.KindRewrite:
			if overlap(ours.Touched(), theirs.Touched()) {
				return Retry
			}
		}
		return Compatible
	case table.KindRewrite:
		switch theirs.Kind {
		case table.KindDelete, table.KindRewrite:
			if overlap(ours.Touched(), theirs.Touched()) && !(theirs.Kind == table.KindDelete && plant.On(plant.RewriteOverDelete)) {
				return Retry
			}
		case table.KindCreateIndex:
			return Retry // plan again, recording remap entries for the new index
		}
		return Compatible
	case table.KindCreateIndex:
		switch theirs.Kind {
		case table.KindDelete, table.KindRewrite:
			return Retry // the index was built from fragments that changed
		}
		return Compatible
	case table.KindOverwrite:
		return Compatible
	}
	return Conflict
}

// mergedTo returns the watermark a merge moved shard to.
func mergedTo(t *table.Transaction, shard string) (uint64, bool) {
	for _, m := range t.MergedShards() {
		if m.Shard == shard {
			return m.Watermark, true
		}
	}
	return 0, false
}

func overlap(a, b []uint64) bool {
	for _, x := range a {
		if _, ok := slices.BinarySearch(b, x); ok {
			return true
		}
	}
	return false
}
