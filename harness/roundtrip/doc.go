// Package roundtrip holds the property test of what a table stores:
// random schemas (nested, nullable, every type a table can hold) and
// random rows, appended through every path (the library, a shard, the
// HTTP server as Arrow and as JSON lines, the CLI from Parquet, CSV and
// JSON-lines files), read back in every format, compacted and read again.
// The values must come back as sent, the statistics in the manifest must
// agree with the rows, and a filtered scan must equal the unfiltered scan
// filtered, and the table's Iceberg view, read with iceberg-go's scan, must
// hold the same values (or the export must refuse the schema by name). It
// has no code of its own outside its test.
package roundtrip
