package ingest

import (
	"context"
	"fmt"
	"iter"
	"os"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/stratadb/strata/table/evolve"
	"github.com/stratadb/strata/table/fragment"
)

// ParquetFile decodes a Parquet file into batches of want, ChunkRows rows
// at a time, matching columns by name as Conform does. Limit does not
// apply: the file is read a row group at a time.
func ParquetFile(path string, want *arrow.Schema, o Options) iter.Seq2[arrow.RecordBatch, error] {
	return func(yield func(arrow.RecordBatch, error) bool) {
		f, err := os.Open(path)
		if err != nil {
			yield(nil, &evolve.InputError{Row: -1, Reason: "not a readable Parquet file: " + err.Error()})
			return
		}
		defer f.Close()
		for rec, err := range Parquet(f, path, want, o) {
			if !yield(rec, err) {
				return
			}
		}
	}
}

// Parquet decodes the Parquet file src (named name in errors: a path, or
// an object's location read with ranged requests, blob.ReaderAt) as
// ParquetFile does.
func Parquet(src parquet.ReaderAtSeeker, name string, want *arrow.Schema, o Options) iter.Seq2[arrow.RecordBatch, error] {
	return func(yield func(arrow.RecordBatch, error) bool) {
		o = o.withDefaults()
		fail := func(err error) { yield(nil, fmt.Errorf("%s: %w", name, err)) }
		rr, err := openParquet(src, o)
		if err != nil {
			fail(err)
			return
		}
		defer rr.Release()
		var base int64
		batches := 0
		next := func() (ok bool, err error) {
			defer func() {
				if p := recover(); p != nil {
					err = &evolve.InputError{Row: base, Reason: fmt.Sprintf("Parquet data does not decode: %v", p)}
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
			rec, err := evolve.Conform(want, raw, evolve.ConformOptions{IgnoreUnknown: o.IgnoreUnknown, RowBase: base})
			if err != nil {
				fail(err)
				return
			}
			base += raw.NumRows()
			batches++
			more := yield(rec, nil)
			rec.Release()
			if !more {
				return
			}
		}
		if err := rr.Err(); err != nil {
			fail(&evolve.InputError{Row: base, Reason: "Parquet data does not decode: " + err.Error()})
			return
		}
		if batches == 0 {
			if err := checkEmpty(want, rr.Schema(), o); err != nil {
				fail(err)
			}
		}
	}
}

// openParquet opens a Parquet file for reading a row group at a time. A
// file the Parquet reader cannot take is an *evolve.InputError: a footer
// that does not parse or map to Arrow, or column chunks that do not lie
// within the file (which the reader would allocate before reading, for a
// struct's fields in goroutines where a panic kills the process).
func openParquet(src parquet.ReaderAtSeeker, o Options) (_ pqarrow.RecordReader, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = &evolve.InputError{Row: -1, Reason: fmt.Sprintf("Parquet footer does not decode: %v", p)}
		}
	}()
	pf, err := file.NewParquetReader(src)
	if err != nil {
		return nil, &evolve.InputError{Row: -1, Reason: "not a readable Parquet file: " + err.Error()}
	}
	ok := false
	defer func() {
		if !ok {
			pf.Close()
		}
	}()
	if err := fragment.CheckFooter(pf.MetaData()); err != nil {
		return nil, &evolve.InputError{Row: -1, Reason: "Parquet footer is damaged: " + err.Error()}
	}
	fr, err := pqarrow.NewFileReader(pf, pqarrow.ArrowReadProperties{BatchSize: int64(o.ChunkRows)}, memory.DefaultAllocator)
	if err != nil {
		return nil, &evolve.InputError{Row: -1, Reason: "Parquet schema does not map to Arrow: " + err.Error()}
	}
	rr, err := fr.GetRecordReader(context.Background(), nil, nil)
	if err != nil {
		return nil, &evolve.InputError{Row: -1, Reason: "Parquet file does not open: " + err.Error()}
	}
	ok = true
	return &closingReader{RecordReader: rr, close: pf.Close}, nil
}

// closingReader closes the file when the record reader is released.
type closingReader struct {
	pqarrow.RecordReader
	close func() error
}

func (c *closingReader) Release() {
	c.RecordReader.Release()
	_ = c.close()
}
