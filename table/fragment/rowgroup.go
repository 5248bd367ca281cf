package fragment

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
)

// RowGroupReader reads one row group of a fragment as record batches.
//
// Invariant: no Parquet page is decoded in a goroutine without a recover.
// The Parquet reader's own parallel mode decodes each column in a
// goroutine of its own, where a damaged page the decoder trips over (a
// page header is not checksummed) panics out of reach of any recover and
// kills the process: a server on every scan of the fragment, the compactor
// Job on every run. Read in parallel, a RowGroupReader decodes each column
// of a batch in a goroutine of its own too, and turns its panic into an
// error; otherwise it decodes them one after another in the caller's
// goroutine, whose recover sees the panic.
type RowGroupReader struct {
	fields   []*pqarrow.ColumnReader
	schema   *arrow.Schema
	mem      memory.Allocator
	batch    int64
	left     int64 // rows not read yet
	parallel bool
}

// NewRowGroupReader opens row group rg of fr for the Parquet leaves (nil:
// every leaf), batch rows at a time, its columns opened and decoded at
// once when parallel (opening one reads its column chunk: read by ranges,
// their reads are then in flight together). fr must not be in the Parquet
// reader's parallel mode (see NewReader).
func NewRowGroupReader(ctx context.Context, fr *pqarrow.FileReader, mem memory.Allocator, leaves []int, rg int, batch int64, parallel bool) (*RowGroupReader, error) {
	if fr.Props.Parallel {
		return nil, fmt.Errorf("table: row group %d: the reader is in parallel mode", rg)
	}
	md := fr.ParquetReader().MetaData()
	if leaves == nil {
		leaves = make([]int, md.Schema.NumColumns())
		for i := range leaves {
			leaves[i] = i
		}
	}
	indices, err := fr.Manifest.GetFieldIndices(leaves)
	if err != nil {
		return nil, err
	}
	included := make(map[int]bool, len(leaves))
	for _, l := range leaves {
		included[l] = true
	}
	readers := make([]*pqarrow.ColumnReader, len(indices))
	i, err := each(len(indices), parallel, func(i int) (err error) {
		if readers[i], err = fr.GetFieldReader(ctx, indices[i], included, []int{rg}); err == nil && readers[i] == nil {
			err = errors.New("it holds none of the columns read")
		}
		return err
	})
	if err != nil {
		err = fmt.Errorf("field %d: %w", indices[i], err)
	}
	r := &RowGroupReader{fields: readers, mem: mem, batch: max(batch, 1), left: md.RowGroup(rg).NumRows(), parallel: parallel}
	if err == nil && len(readers) == 0 {
		err = errors.New("no column to read")
	}
	if err != nil {
		r.Release()
		return nil, fmt.Errorf("table: row group %d: %w", rg, err)
	}
	fields := make([]arrow.Field, len(readers))
	for i, f := range readers {
		fields[i] = *f.Field()
	}
	r.schema = arrow.NewSchema(fields, fr.Manifest.SchemaMeta)
	return r, nil
}

// each runs fn for 0 … n−1 — one after another in the caller's
// goroutine, or at once, a goroutine each, where a panic (a damaged page
// the decoder trips over) becomes that call's error — and returns the
// first that failed, and its error.
func each(n int, parallel bool, fn func(i int) error) (int, error) {
	errs := make([]error, n)
	if parallel && n > 1 {
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				defer func() {
					if p := recover(); p != nil {
						errs[i] = fmt.Errorf("%v", p)
					}
				}()
				errs[i] = fn(i)
			})
		}
		wg.Wait()
	} else {
		for i := range n {
			if errs[i] = fn(i); errs[i] != nil {
				break
			}
		}
	}
	for i, err := range errs {
		if err != nil {
			return i, err
		}
	}
	return 0, nil
}

// Next returns the next batch, which the caller releases; nil at the end
// of the row group.
func (r *RowGroupReader) Next() (arrow.RecordBatch, error) {
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
	if i, err := each(len(r.fields), r.parallel, func(i int) (err error) {
		cols[i], err = r.column(i, n)
		return err
	}); err != nil {
		return nil, fmt.Errorf("column %q: %w", r.schema.Field(i).Name, err)
	}
	r.left -= n
	return array.NewRecordBatch(r.schema, cols, n), nil
}

// column reads the next n values of field i as one array.
func (r *RowGroupReader) column(i int, n int64) (arrow.Array, error) {
	data, err := r.fields[i].NextBatch(n)
	if err != nil {
		return nil, err
	}
	defer data.Release()
	if int64(data.Len()) != n {
		return nil, fmt.Errorf("read %d values, want %d", data.Len(), n)
	}
	if chunks := data.Chunks(); len(chunks) == 1 {
		chunks[0].Retain()
		return chunks[0], nil
	}
	return array.Concatenate(data.Chunks(), r.mem)
}

// Release releases the column readers.
func (r *RowGroupReader) Release() {
	for _, f := range r.fields {
		if f != nil {
			f.Release()
		}
	}
}
