// Package commit makes new versions of a table: transactions as plain
// values, the conflict matrix, and the optimistic commit loop.
//
// A commit writes its data objects first, then creates the next manifest
// with a conditional create (PutIfAbsent); that create is the commit. On a
// lost race the loop reads every manifest committed since its read version,
// checks each against the conflict matrix (Check), and either rebases
// (re-applies its transaction to the newest state, never rewriting data)
// and tries again with jittered exponential backoff, or stops with a
// *ConflictError that names both transactions.
//
// Invariants:
//
//   - Never a duplicate commit: every transaction carries a commit id (a
//     ULID). After any failure of the conditional create that might hide a
//     landed write — a timeout, a lost response, or a 412 that an SDK retry
//     of our own request produced — the loop reads the manifest at that
//     version and compares commit ids before doing anything else.
//   - Never a lost commit: success is reported only when a manifest holding
//     our commit id exists at a version above the garbage collector's
//     boundary (see table.GCBoundaryDir).
//   - Append never conflicts with Rewrite, so appends and compaction run
//     side by side; two Rewrites over a common fragment conflict.
package commit
