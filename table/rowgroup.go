package table

import (
	"context"
	"fmt"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
)

// rowGroupReader reads one row group of a fragment as record batches.
//
// Invariant: no Parquet page is decoded in a goroutine without a recover.
// The Parquet reader's own parallel mode decodes each column in a
// goroutine of its own, where a damaged page the decoder trips over (a
// page header is not checksummed) panics out of reach of any recover and
// kills the process: a server on every scan of the fragment, the compactor
// Job on every run. Read in parallel, a rowGroupReader decodes each column
// of a batch in a goroutine of its own too, and turns its panic into an
// error; otherwise it decodes them one after another in the caller's
// goroutine, whose recover sees the panic.
type rowGroupReader struct {
	fields   []*pqarrow.ColumnReader
	schema   *arrow.Schema
	mem      memory.Allocator
	batch    int64
	left     int64 // rows not read yet
	parallel bool
}

// newRowGroupReader opens row group rg of fr for the Parquet leaves (nil:
// every leaf), batch rows at a time, its columns decoded at once when
// parallel. fr must not be in the Parquet reader's parallel mode (see
// fragmentReader).
func newRowGroupReader(ctx context.Context, fr *pqarrow.FileReader, mem memory.Allocator, leaves []int, rg int, batch int64, parallel bool) (*rowGroupReader, error) {
	if fr.Props.Parallel {
		return nil, fmt.Errorf("table: row group %d: the reader is in parallel mode", rg)
	}
	md := fr.ParquetReader().MetaData()
	if rg < 0 || rg >= md.NumRowGroups() {
		return nil, fmt.Errorf("table: row group %d of %d", rg, md.NumRowGroups())
	}
	if leaves == nil {
		leaves = make([]int, md.Schema.NumColumns())
		for i := range leaves {
			leaves[i] = i
		}
	}
	fields, schema, err := fieldReaders(ctx, fr, leaves, rg, parallel)
	if err != nil {
		return nil, err
	}
	return &rowGroupReader{fields: fields, schema: schema, mem: mem, batch: max(batch, 1),
		left: md.RowGroup(rg).NumRows(), parallel: parallel && len(fields) > 1}, nil
}

// fieldReaders opens the readers of the fields of row group rg that
// hold the Parquet leaves, at once when parallel: opening one reads its
// column chunk, so that read by ranges, their reads are in flight
// together.
func fieldReaders(ctx context.Context, fr *pqarrow.FileReader, leaves []int, rg int, parallel bool) (_ []*pqarrow.ColumnReader, _ *arrow.Schema, err error) {
	if !parallel {
		return fr.GetFieldReaders(ctx, leaves, []int{rg})
	}
	indices, err := fr.Manifest.GetFieldIndices(leaves)
	if err != nil {
		return nil, nil, err
	}
	if len(indices) == 0 {
		return nil, nil, fmt.Errorf("table: row group %d: no column to read", rg)
	}
	included := make(map[int]bool, len(leaves))
	for _, l := range leaves {
		included[l] = true
	}
	readers := make([]*pqarrow.ColumnReader, len(indices))
	errs := make([]error, len(indices))
	var wg sync.WaitGroup
	for i, field := range indices {
		wg.Go(func() {
			defer func() {
				if p := recover(); p != nil {
					errs[i] = fmt.Errorf("field %d: %v", field, p)
				}
			}()
			readers[i], errs[i] = fr.GetFieldReader(ctx, field, included, []int{rg})
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			for _, r := range readers {
				if r != nil {
					r.Release()
				}
			}
			return nil, nil, err
		}
	}
	fields := make([]arrow.Field, 0, len(readers))
	for _, r := range readers {
		if r == nil {
			return nil, nil, fmt.Errorf("table: row group %d: no column to read", rg)
		}
		fields = append(fields, *r.Field())
	}
	return readers, arrow.NewSchema(fields, fr.Manifest.SchemaMeta), nil
}

// next returns the next batch, which the caller releases; nil at the end
// of the row group.
func (r *rowGroupReader) next() (arrow.RecordBatch, error) {
	if r.left <= 0 {
		return nil, nil
	}
	n := min(r.batch, r.left)
	cols := make([]arrow.Array, len(r.fields))
	defer func() {
		for _, c := range cols {
			if c != nil {
				c.Release()
			}
		}
	}()
	errs := make([]error, len(r.fields))
	if r.parallel {
		var wg sync.WaitGroup
		for i := range r.fields {
			wg.Go(func() {
				defer func() {
					if p := recover(); p != nil {
						errs[i] = fmt.Errorf("column %q: %v", r.schema.Field(i).Name, p)
					}
				}()
				cols[i], errs[i] = r.column(i, n)
			})
		}
		wg.Wait()
	} else {
		for i := range r.fields {
			if cols[i], errs[i] = r.column(i, n); errs[i] != nil {
				break
			}
		}
	}
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	r.left -= n
	return array.NewRecordBatch(r.schema, cols, n), nil
}

// column reads the next n values of field i as one array.
func (r *rowGroupReader) column(i int, n int64) (arrow.Array, error) {
	name := r.schema.Field(i).Name
	data, err := r.fields[i].NextBatch(n)
	if err != nil {
		return nil, fmt.Errorf("column %q: %w", name, err)
	}
	defer data.Release()
	if int64(data.Len()) != n {
		return nil, fmt.Errorf("column %q: read %d values, want %d", name, data.Len(), n)
	}
	switch chunks := data.Chunks(); len(chunks) {
	case 1:
		chunks[0].Retain()
		return chunks[0], nil
	default:
		a, err := array.Concatenate(chunks, r.mem)
		if err != nil {
			return nil, fmt.Errorf("column %q: %w", name, err)
		}
		return a, nil
	}
}

// release releases the column readers.
func (r *rowGroupReader) release() {
	for _, f := range r.fields {
		f.Release()
	}
}
