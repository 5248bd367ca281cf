// Package table reads a table: it opens a version (Open, Snapshot) and
// scans, counts and takes its rows, within a memory budget, through the
// key indexes and with the filters of package table/expr; it copies and
// recodes fragments for the writers, and keeps tags and the named
// consumers' positions.
//
// A table is a prefix of a bucket. Its state at version N is one manifest
// object, _versions/<inverted N>.manifest, holding the whole state of that
// version (never a delta). The parts of a table live in packages below
// this one, each importing only those below it:
//
//	table/value     the scalar values filters compare and statistics record
//	table/evolve    the schema and how it changes (stored names, Alter)
//	table/format    the objects in the store: manifests, deletion vectors,
//	                statistics, idempotency records, object names
//	table/expr      the filter language
//	table/fragment  Parquet fragments: writing, opening, streaming
//
// and table/changes, above it, reads what versions changed (the change
// feed, follow). Writing new versions (the commit loop and the conflict
// matrix) is package commit's. docs/format.md describes every object byte
// by byte.
//
// Invariants this package relies on and keeps:
//
//   - A Snapshot is immutable: it reads only objects its manifest names,
//     and those objects never change, so its rows never change.
//   - A scan holds at most its memory budget of fetched bytes (Memory);
//     fragments wait for room rather than exceed it.
//   - The named consumers' positions stay beside the tags: garbage
//     collection keeps what they have not read.
package table
