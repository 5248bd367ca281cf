package table

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/stratadb/strata/table/evolve"
	"github.com/stratadb/strata/table/format"
	"github.com/stratadb/strata/table/fragment"
)

// recodeRowGroups decodes f's live rows and encodes them again into
// Parquet held in memory, RowGroupRows rows at a time (the last group
// fewer), and hands each row group to emit like a copied one, then the
// live rows' statistics: a fragment with a deletion vector joins the
// others without the whole bin being decoded.
//
// Rows are cut into groups exactly where the fragment writer's row groups
// end, whatever the sizes of the batches the scan yields (one per source
// row group, fewer rows where rows are deleted): a group is never more
// than RowGroupRows rows, so memory stays bounded by one row group, and
// every row group the encoder writes is handed on.
func (s *Snapshot) recodeRowGroups(ctx context.Context, f *format.Fragment, emit func(*sourceRowGroup) bool) error {
	return s.recodeBatches(f, func(each func(arrow.RecordBatch) error) error {
		for rec, err := range s.Scan(ctx, ScanOptions{Fragments: []uint64{f.ID}, Parallelism: 1, BatchSize: fragment.RowGroupRows}) {
			if err == nil {
				err = each(rec)
			}
			if err != nil {
				return err
			}
		}
		return nil
	}, emit)
}

// recodeOpened is recodeRowGroups of a fragment opened with rp (a plan
// of every column, RowGroupRows rows a batch), which it closes.
func (s *Snapshot) recodeOpened(ctx context.Context, rp *scanPlan, o *opened, emit func(*sourceRowGroup) bool) error {
	defer o.close()
	return s.recodeBatches(o.f, func(each func(arrow.RecordBatch) error) error {
		var eachErr error
		err := rp.decode(ctx, o, func(rec arrow.RecordBatch) bool {
			defer rec.Release()
			eachErr = each(rec)
			return eachErr == nil
		})
		if eachErr != nil {
			return eachErr
		}
		return err
	}, emit)
}

// errRecodeStopped: emit said stop (recodeBatches returns nil then).
var errRecodeStopped = errors.New("table: recode stopped")

// recodeBatches is recodeRowGroups of fragment f's live rows, which
// batches hands, in order, to its argument (a batch is the caller's: it
// is not retained beyond the call).
func (s *Snapshot) recodeBatches(f *format.Fragment, batches func(func(arrow.RecordBatch) error) error, emit func(*sourceRowGroup) bool) error {
	schema := evolve.StoredSchema(s.m.Schema()) // the rows scanned are written under their stored names
	acc := make([]format.StatsAcc, schema.NumFields())
	for i, fd := range schema.Fields() {
		acc[i].Name = fd.Name
	}
	var pending []arrow.RecordBatch
	var pendingRows, live int64
	defer func() { fragment.ReleaseAll(pending) }()
	stopped := false // emit said stop
	flush := func() error {
		if len(pending) == 0 {
			return nil
		}
		groups, err := encodeRowGroups(schema, pending)
		fragment.ReleaseAll(pending)
		pending, pendingRows = nil, 0
		if err != nil {
			return fmt.Errorf("table: recode fragment %s: %w", f.Key, err)
		}
		for _, u := range groups {
			u.key = f.Key
			if stopped = !emit(u); stopped {
				break
			}
		}
		return nil
	}
	err := batches(func(rec arrow.RecordBatch) error {
		for i := range acc {
			acc[i].Add(rec.Column(i))
		}
		live += rec.NumRows()
		for off := int64(0); off < rec.NumRows(); {
			n := min(rec.NumRows()-off, fragment.RowGroupRows-pendingRows)
			part := rec.NewSlice(off, off+n)
			pending = append(pending, fragment.WithTypesOf(schema, part))
			part.Release()
			off, pendingRows = off+n, pendingRows+n
			if pendingRows < fragment.RowGroupRows {
				continue
			}
			if err := flush(); err != nil {
				return err
			}
			if stopped {
				return errRecodeStopped
			}
		}
		return nil
	})
	if errors.Is(err, errRecodeStopped) {
		return nil
	}
	if err != nil {
		return err
	}
	if err := flush(); err != nil || stopped {
		return err
	}
	st := &sourceStats{rows: live, columns: make([]format.ColumnStats, len(acc))}
	for i := range acc {
		st.columns[i] = acc[i].Result()
	}
	emit(&sourceRowGroup{key: f.Key, stats: st})
	return nil
}

// encodeRowGroups encodes batches as a Parquet file held in memory and
// returns its row groups, each checked like a source's.
func encodeRowGroups(schema *arrow.Schema, batches []arrow.RecordBatch) (_ []*sourceRowGroup, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("encoding panicked: %v", r)
		}
	}()
	var buf bytes.Buffer
	fw, err := pqarrow.NewFileWriter(schema, &buf, fragment.Props(), pqarrow.NewArrowWriterProperties(pqarrow.WithStoreSchema()))
	if err != nil {
		return nil, err
	}
	relabelled := make([]arrow.RecordBatch, len(batches))
	for i, rec := range batches {
		relabelled[i] = fragment.WithTypesOf(schema, rec)
	}
	defer fragment.ReleaseAll(relabelled)
	tbl := array.NewTableFromRecords(schema, relabelled)
	defer tbl.Release()
	err = fw.WriteTable(tbl, fragment.RowGroupRows)
	if cerr := fw.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, err
	}
	data := buf.Bytes()
	pf, err := file.NewParquetReader(bytes.NewReader(data))
	if err != nil {
		return nil, err
	}
	md := pf.MetaData()
	leaves := indices(md.NumColumns())
	ranges := fragment.ChunkRanges(md, indices(md.NumRowGroups()), leaves)
	out := make([]*sourceRowGroup, md.NumRowGroups())
	for rg := range out {
		u := &sourceRowGroup{file: md, md: md.RowGroup(rg)}
		for _, r := range ranges[rg*len(leaves) : (rg+1)*len(leaves)] {
			u.chunks = append(u.chunks, data[r[0]:r[0]+r[1]])
			u.bytes += r[1]
		}
		if u.pages, err = checkPages(md, rg, bytes.NewReader(data)); err != nil {
			return nil, err
		}
		out[rg] = u
	}
	return out, nil
}
