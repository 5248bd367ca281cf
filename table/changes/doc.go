// Package changes reads what a table's versions changed: the rows each
// version inserted and deleted (Changes), as record batches with their
// change columns (ChangeRows, WithChangeColumns), and a follow that waits
// for new versions and records a named consumer's position as it goes
// (Follow). It reads only what package table defines — manifests,
// transactions, fragments, deletion vectors — and writes nothing but a
// consumer's position (table.SetConsumer).
//
// Invariants:
//
//   - A version's changes are delivered once, in version order, its
//     deletes before its inserts; a compaction or an index changes no row.
//   - A version garbage collection took is a *format.ChangesCollectedError
//     naming the oldest version left, never a gap.
//   - A commit that a later version took back is skipped when it was
//     never readable, and delivered when it was (a reader may have seen
//     it).
package changes
