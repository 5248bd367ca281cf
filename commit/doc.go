// Package commit makes new versions of a table: transactions as plain
// values, the conflict matrix, and the optimistic commit loop. It is a part
// of the engine: programs reach it through package engine (engine.DB), and
// the drivers — the server, the Job, the command-line verbs — never import
// it (harness/houserules/doors_test.go).
//
// A commit writes its data objects first, then creates the next manifest
// with a conditional create (PutIfAbsent); that create is the commit. On a
// lost race the loop reads the transaction of every version committed since
// its read version, checks each against the conflict matrix (Check), and
// either rebases (re-applies its transaction to the newest state, never
// rewriting data) and tries again, or stops with a *ConflictError that
// names both transactions. A loser rebases on the winner's transaction
// alone — read already to learn the outcome of its create — and tries the
// next version at once, one round trip after losing; every fourth loss in
// a row it catches up with a LIST. It backs off (jittered exponential)
// only in a storm: when that LIST finds eight or more versions made after
// the one it lost. So a writer that lost is not the one that keeps losing:
// through a 20 ms store, p99 commit latency of four racing writers fell
// from 2.9-4.0 s to 0.7-0.9 s, and their slowest commit stays near a
// second (it reached 4-7 s when any long losing streak backed off).
//
// Above that loop, every write is a plan run by one driver (drive.go): a
// write's plan function, given the version to plan against, writes the
// objects its commit names and returns the transaction (a Plan); the
// driver reads the version, commits, keeps deletion vectors through a
// stall past garbage collection, deletes a plan's objects when its commit
// certainly did not land, and plans again after a conflict the matrix
// says the write must see, with one pause rule and one budget. The
// Table's verbs (Append, Delete, Update, Upsert, Alter, CreateIndex,
// MergeKeyed) run on it, and so do, through Drive, a fleet merge of
// copies (walshard), a compaction and DropMissing (compactor). An Undo
// keeps its own loop: it retries even transient errors at every step,
// since until it lands the newest version references data that is gone.
//
// Invariants:
//
//   - Never a duplicate commit: every transaction carries a commit id (a
//     ULID). After any failure of the conditional create that might hide a
//     landed write — a timeout, a lost response, or a 412 that an SDK retry
//     of our own request produced — the loop reads the manifest at that
//     version and compares commit ids before doing anything else; when
//     the store answers none of those reads, the error wraps
//     ErrOutcomeUnknown.
//   - Never a lost commit: success is reported only when a manifest holding
//     our commit id exists at a version above the garbage collector's
//     boundary (see format.GCBoundaryDir).
//   - Append never conflicts with Rewrite, so appends and compaction run
//     side by side; two Rewrites over a common fragment conflict.
package commit
