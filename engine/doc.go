// Package engine is the one owner of a table's life inside a process:
// Open returns a *DB that does, for one table, everything this process does
// to it — its appends (directly, or through the process's own WAL shard),
// the flushes of that shard's memtable, the merges that install flushed
// generations into the manifest (for every shard of the fleet: one
// installer), compaction under the table's lease with its run recorded,
// garbage collection, the adoption of abandoned shards, and the Job's
// maintenance pass — behind one context and one Close.
//
// It is the one way in to a table: every verb — create (Create), append,
// upsert, update, delete, alter, restore, index, fresh reads, merges,
// compaction, GC, repair, drop, stats and export — is a DB method or a
// function here, and the types its parts define (commit, walshard,
// compactor, lakehouse) are named here too (names.go), so that a driver
// imports none of the parts: a house rule (harness/houserules/doors_test.go).
// Package table stays every driver's for the values a table is read and
// written with: schemas, filters, snapshots, tags and changes.
//
// Servers, the compactor Job, the command-line verbs, the demo and the
// benchmark are drivers of a DB (the simulation drives the parts too, on
// purpose); what each did is told to an EventListener (flush, merge,
// compaction, GC, adoption, background error), whose default logs through
// slog and to which metrics subscribe.
//
// Invariants:
//
//   - Every background task of a DB runs on the DB's context and is counted
//     by its WaitGroup: Close cancels the one and waits for the other, so
//     nothing a DB started outlives it.
//   - A background task's failure is never dropped: it is told to the
//     listener's BackgroundError and kept as the DB's last error (Stats).
//   - A compaction is run, and its run recorded, by one function
//     (DB.Compact): under the table's lease, with its real duration,
//     failed or not; a run that finds nothing to do records nothing.
//   - Merge means installing flushed generations into the manifest;
//     compact means rewriting fragments. Nothing else is called either.
package engine
