// Package lakehouse describes a Strata table's versions as an Apache
// Iceberg table (format v2), so that SQL engines — DuckDB, Spark, Trino,
// Flink, and every other Iceberg reader — read the table correctly without
// a byte of its data being copied. It is a part of the engine: programs
// export through package engine/iceberg (iceberg.Export, iceberg.ExportKept).
//
// The view lives beside the table, under _iceberg/ (docs/format.md):
//
//	_iceberg/metadata/v<N>.metadata.json   table metadata; put-if-absent; N counts exports
//	_iceberg/metadata/version-hint.text    N of the newest metadata (the one object rewritten)
//	_iceberg/metadata/snap-<v>-<ULID>.avro manifest list of the snapshot of Strata version v
//	_iceberg/metadata/<ULID>-m.avro        manifests (data files or position-delete files)
//	_iceberg/deletes/<vector>.parquet      position deletes of one Strata deletion vector
//
// Each Strata version becomes one snapshot whose id and sequence number are
// the version number, whose timestamp is the version's, and whose summary
// carries the version, its operation and its commit id. Data files are the
// table's fragments in place (data/…, _shards/…/gen/… and _shards/…/wal/…), with the
// statistics the Strata manifest already holds. Deletion vectors become
// format-v2 position-delete files, one per vector, written once: v2 because
// every engine named above reads it, whereas v3 deletion vectors are not
// yet read by all of them. The fragments carry no Iceberg field ids; the
// view sets schema.name-mapping.default, so readers map columns by name, and
// every fragment ever written — old or new — reads the same way. (A table
// whose schema carries Parquet field ids has them in its fragments too;
// readers go by a file's ids first, so the view takes those ids.) Strata
// tags become tag refs; the main branch is the newest version described.
//
// Invariants:
//
//   - Export never modifies the table: it reads manifests, tags and
//     deletion vectors and writes only under _iceberg/.
//   - Snapshots describe exactly the versions that garbage collection keeps
//     (the newest KeepVersions, those younger than RetainFor, tagged ones,
//     all above the GC boundary). Garbage collection also keeps every version
//     the newest metadata describes (layout.ReadRefs), so nothing a snapshot names is
//     collected while the view names it; the next export drops snapshots of
//     versions that aged out, and the collection after that takes them.
//   - A metadata file is created with put-if-absent under the next number:
//     of two concurrent exports one wins, the other reads the new view and
//     tries again. Manifests, manifest lists and delete files have fresh or
//     content-derived names and are never rewritten.
//   - An export costs requests in proportion to what changed since the
//     previous one: the previous snapshot's manifests are reused, and only
//     those holding a file that a version removed are read and rewritten.
//     Its work per version grows with the table's columns, never with
//     their square: a schema's columns are matched by name through an
//     index, and a fragment's statistics likewise.
//   - A type Iceberg cannot represent exactly (uint32, uint64, float16, timestamps
//     in nanoseconds or a zone other than UTC, time32) is refused with
//     layout.ErrUnsupported naming the column, never exported with changed values.
//
// The names of the view's objects and the reading of what it holds on to
// live in package lakehouse/layout, which garbage collection and the
// strata command link; this package, which links the Iceberg writer, is
// linked by the programs that export (strata-iceberg, strata-compactor).
package lakehouse
