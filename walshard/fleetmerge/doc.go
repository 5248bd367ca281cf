// Package fleetmerge installs the flushed generations of every shard of a
// table in one commit (Merge): it lists the flush objects under
// _fleet/flush/, plans each shard's part (its generations above the
// table's watermark for it, within a memory budget), copies the flushed
// rows into one new fragment (or installs a generation's own parts), and
// commits them with every shard's new watermark. A shard's own merge
// installs its generations through the same functions (Install,
// InstallKeyed). It also reads each shard's lag (Lags) and remembers, in
// Memory, what a long-running process already saw.
//
// Invariants:
//
//   - A merge of copies applies as planned or not at all: its commit is
//     Whole, and one that meets another merge of its shards plans again.
//   - Merging is exactly-once: a shard's watermark moves in the manifest
//     that adds its rows, and the conflict matrix turns a second merge of
//     the same generations into a no-op.
//   - A named append stored in several shards is installed once: a merge
//     installs a name's rows only when the table does not record the name,
//     and records every name it installs or drops at its own clock.
package fleetmerge
