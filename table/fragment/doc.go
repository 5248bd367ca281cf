// Package fragment writes and opens a table's Parquet fragments: the
// Writer that streams record batches into one new fragment object
// (zstd, with row-group statistics), the opening of a fragment from its
// footer, and the byte streams and row-group readers that scans decode.
//
// Invariants:
//
//   - A fragment is written once under a fresh name and never changed; a
//     writer that fails leaves no object a manifest names.
//   - A fragment is opened only after its footer is checked against what
//     the manifest says of it (CheckFooter): a damaged or foreign object is
//     a corrupt-object error naming its key, never a panic.
package fragment
