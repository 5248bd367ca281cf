// Package compactor folds a table's small fragments back together. It is a
// part of the engine, as are its garbage collection, lease, repair and run
// history: programs reach them through package engine (engine.DB), and the
// drivers never import it (harness/houserules/doors_test.go).
//
// Every merge and direct append adds a fragment, so a busy table gathers
// many small ones that slow every scan. ShouldCompact decides whether a run
// is due (a pure function of the table's state, a policy and a clock);
// PlanCompaction picks bins of adjacent small fragments; Compact rewrites
// each bin into one fragment by streaming record batches (memory bounded by
// a few batches and one row group, not by the table) and commits one
// Rewrite.
//
// Invariants:
//
//   - Compaction conserves rows and bytes of every value: a Rewrite removes
//     only fragments whose live rows it wrote, byte for byte, into the
//     fragments it adds; deleted rows are dropped.
//   - Appends and shard merges never conflict with a compaction (the
//     conflict matrix rebases them); another Rewrite touching the same
//     fragments makes the compaction plan again, never lose a row; deletion
//     vectors given to its sources meanwhile (a Delete, an upsert's) are
//     carried onto the fragments it wrote (rebase.go), or, where they
//     cannot be, it plans again: every delete holds.
//   - One driver per table is expected (a Job with a lease); correctness
//     never depends on it.
//   - Garbage collection never deletes what a reader may still reach: the
//     kept versions (newest, young, tagged, and those the table's Iceberg
//     view describes, see package lakehouse) and every object they or the
//     view's newest metadata reference.
package compactor
