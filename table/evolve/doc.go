// Package evolve is a table's schema and how it changes: the schema's
// encoding, the check of a batch against it (Conform, CheckSchema), the
// stored names that let a column be renamed, added, dropped or widened by
// metadata alone (Alter), and the reading of data written under an older
// schema as the current one (Batch).
//
// Invariants:
//
//   - A column's stored name, the name its values carry in fragments, WAL
//     entries and statistics, never changes once given; a renamed column
//     keeps it in its field's metadata (StoredNameKey).
//   - A dropped column's stored name is retired (RetiredKey) and never
//     given again, so an added column never reads a dropped one's values.
//   - A schema change is refused (ErrBadSchemaChange) unless data written
//     before it reads under it without loss: columns are added nullable,
//     and widened only to a type that holds every value of the narrower.
package evolve
