// Package format is a table's objects in the store: the manifests that
// are its versions (Manifest, Fragment, Transaction and their encoding),
// the object names (layout.go), deletion vectors, column statistics, the
// idempotency records of named appends (Producers), and the checks of a
// table's place in a bucket (names.go, discover.go). docs/format.md
// describes every object byte by byte.
//
// Invariants:
//
//   - No object is overwritten. Manifests and tags are created with
//     PutIfAbsent; fragments and deletion vectors get fresh random names.
//   - Manifest names count down (math.MaxUint64 − version, 20 digits), so
//     the first key a LIST of _versions/ returns is the newest version.
//   - A manifest holds the whole state of its version, never a delta.
//   - Decoding checks an object's magic, format version, length and
//     checksum; a damaged or unknown object is a *CorruptError naming its
//     key (or ErrUnsupportedFormat), never a panic and never a silently
//     wrong table.
package format
