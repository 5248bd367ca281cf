// Package table owns Strata's on-store format and read path: schemas,
// Parquet fragments, manifests, tags, deletion vectors, and scans.
//
// A table is a prefix of a bucket. Its state at version N is one manifest
// object, _versions/<inverted N>.manifest, holding the whole state of that
// version (never a delta): schema, fragments with statistics, deletion
// vectors, shard watermarks, and the transaction that made it. docs/format.md
// describes every object byte by byte.
//
// Invariants this package relies on and keeps:
//
//   - No object is overwritten. Manifests and tags are created with
//     PutIfAbsent; fragments and deletion vectors get fresh random names.
//   - Manifest names count down (math.MaxUint64 − version, 20 digits), so
//     the first key a LIST of _versions/ returns is the newest version:
//     opening the latest version costs one LIST page and one GET whatever
//     the number of versions.
//   - A Snapshot is immutable: it reads only objects its manifest names,
//     and those objects never change, so its rows never change.
//   - Decoding checks a manifest's magic, format version, length and
//     checksum; a damaged or unknown object is a typed error naming its key,
//     never a panic and never a silently wrong table.
//
// Writing new versions (the commit loop and the conflict matrix) is package
// commit's; reading what versions changed (the change feed, follow) is
// package table/changes', above this one. The named consumers' positions
// stay here, beside the tags: garbage collection keeps what they have not
// read.
package table
