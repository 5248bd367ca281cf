package ingest

import (
	"context"
	"fmt"
	"iter"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/stratadb/strata/table"
)

// ParquetFile decodes a Parquet file into batches of want, ChunkRows rows
// at a time, matching columns by name as Conform does. Limit does not
// apply: the file is read a row group at a time.
func ParquetFile(path string, want *arrow.Schema, o Options) iter.Seq2[arrow.RecordBatch, error] {
	return func(yield func(arrow.RecordBatch, error) bool) {
		o = o.withDefaults()
		fail := func(err error) { yield(nil, fmt.Errorf("%s: %w", path, err)) }
		pf, err := file.OpenParquetFile(path, false)
		if err != nil {
			fail(&table.InputError{Row: -1, Reason: "not a readable Parquet file: " + err.Error()})
			return
		}
		defer pf.Close()
		fr, err := pqarrow.NewFileReader(pf, pqarrow.ArrowReadProperties{BatchSize: int64(o.ChunkRows)}, memory.DefaultAllocator)
		if err != nil {
			fail(&table.InputError{Row: -1, Reason: "Parquet schema does not map to Arrow: " + err.Error()})
			return
		}
		rr, err := fr.GetRecordReader(context.Background(), nil, nil)
		if err != nil {
			fail(err)
			return
		}
		defer rr.Release()
		var base int64
		next := func() (ok bool, err error) {
			defer func() {
				if p := recover(); p != nil {
					err = &table.InputError{Row: base, Reason: fmt.Sprintf("Parquet data does not decode: %v", p)}
				}
			}()
			return rr.Next(), nil
		}
		for {
			ok, err := next()
			if err != nil {
				fail(err)
				return
			}
			if !ok {
				break
			}
			raw := rr.RecordBatch()
			rec, err := table.Conform(want, raw, table.ConformOptions{IgnoreUnknown: o.IgnoreUnknown, RowBase: base})
			if err != nil {
				fail(err)
				return
			}
			base += raw.NumRows()
			more := yield(rec, nil)
			rec.Release()
			if !more {
				return
			}
		}
		if err := rr.Err(); err != nil {
			fail(&table.InputError{Row: base, Reason: "Parquet data does not decode: " + err.Error()})
		}
	}
}
