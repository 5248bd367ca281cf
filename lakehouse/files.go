package lakehouse

import (
	"bytes"
	"context"
	"encoding"
	"errors"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"github.com/apache/iceberg-go"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/lakehouse/layout"
	"github.com/stratadb/strata/table/evolve"
	"github.com/stratadb/strata/table/format"
	"github.com/stratadb/strata/table/value"
)

// dataFile describes a fragment as an Iceberg data file, with the counts
// and bounds the Strata manifest holds for its top-level columns (no
// request is made). Bounds are given only where the Strata statistic and
// the Iceberg type agree exactly; a missing bound only costs pruning.
func dataFile(loc string, f *format.Fragment, sc *iceberg.Schema, arrowSchema *arrow.Schema) (iceberg.DataFile, error) {
	b, err := iceberg.NewDataFileBuilder(*iceberg.UnpartitionedSpec, iceberg.EntryContentData, loc+"/"+f.Key,
		iceberg.ParquetFile, nil, nil, nil, f.Rows, f.Bytes)
	if err != nil {
		return nil, err
	}
	values, nulls := map[int]int64{}, map[int]int64{}
	lower, upper := map[int][]byte{}, map[int][]byte{}
	// The fragment's statistics by column, found once each: a wide table
	// has thousands of columns.
	stats := make(map[string]*format.ColumnStats, len(f.Columns))
	for i := range f.Columns {
		if _, dup := stats[f.Columns[i].Name]; !dup { // the first, as Fragment.Stats
			stats[f.Columns[i].Name] = &f.Columns[i]
		}
	}
	for _, field := range sc.Fields() {
		if _, ok := field.Type.(iceberg.PrimitiveType); !ok {
			continue
		}
		stored := field.Name
		if af, ok := arrowSchema.FieldsByName(field.Name); ok && len(af) == 1 {
			stored = evolve.StoredName(af[0])
		}
		st := stats[stored]
		if st == nil {
			continue
		}
		values[field.ID], nulls[field.ID] = f.Rows, st.Nulls
		var unit arrow.TimeUnit = -1
		if af, ok := arrowSchema.FieldsByName(field.Name); ok && len(af) == 1 {
			if ts, ok := af[0].Type.(*arrow.TimestampType); ok {
				unit = ts.Unit
			}
		}
		if lo, ok := bound(field.Type, st.Min, unit); ok {
			if hi, ok := bound(field.Type, st.Max, unit); ok {
				lower[field.ID], upper[field.ID] = lo, hi
			}
		}
	}
	return b.ValueCounts(values).NullValueCounts(nulls).LowerBoundValues(lower).UpperBoundValues(upper).Build(), nil
}

// bound encodes a Strata statistic as an Iceberg single-value bound.
func bound(t iceberg.Type, v *value.Value, unit arrow.TimeUnit) ([]byte, bool) {
	if v == nil {
		return nil, false
	}
	var lit encoding.BinaryMarshaler
	switch t.(type) {
	case iceberg.BooleanType:
		if v.Kind == value.KindBool {
			lit = iceberg.BoolLiteral(v.B)
		}
	case iceberg.Int32Type:
		switch v.Kind {
		case value.KindInt:
			lit = iceberg.Int32Literal(int32(v.I))
		case value.KindUint:
			lit = iceberg.Int32Literal(int32(v.U))
		}
	case iceberg.Int64Type:
		switch v.Kind {
		case value.KindInt:
			lit = iceberg.Int64Literal(v.I)
		case value.KindUint:
			lit = iceberg.Int64Literal(int64(v.U))
		}
	case iceberg.Float32Type:
		if v.Kind == value.KindFloat {
			lit = iceberg.Float32Literal(float32(v.F))
		}
	case iceberg.Float64Type:
		if v.Kind == value.KindFloat {
			lit = iceberg.Float64Literal(v.F)
		}
	case iceberg.StringType:
		if v.Kind == value.KindString {
			lit = iceberg.StringLiteral(v.S)
		}
	case iceberg.BinaryType:
		if v.Kind == value.KindBytes {
			lit = iceberg.BinaryLiteral(v.X)
		}
	case iceberg.DateType:
		if v.Kind == value.KindInt {
			lit = iceberg.DateLiteral(v.I)
		}
	case iceberg.TimestampType, iceberg.TimestampTzType:
		// Seconds are stored as milliseconds, and Strata keeps no
		// statistics of them; nanoseconds are refused before this.
		if v.Kind == value.KindInt && unit == arrow.Microsecond {
			lit = iceberg.TimestampLiteral(v.I)
		} else if v.Kind == value.KindInt && unit == arrow.Millisecond {
			lit = iceberg.TimestampLiteral(v.I * 1000)
		}
	}
	if lit == nil {
		return nil, false
	}
	data, err := lit.MarshalBinary()
	return data, err == nil
}

// Field ids the Iceberg spec reserves for a position-delete file's columns.
const (
	filePathFieldID = 2147483546
	posFieldID      = 2147483545
)

var positionDeleteSchema = arrow.NewSchema([]arrow.Field{
	{Name: "file_path", Type: arrow.BinaryTypes.String, Metadata: arrow.NewMetadata([]string{"PARQUET:field_id"}, []string{fmt.Sprint(filePathFieldID)})},
	{Name: "pos", Type: arrow.PrimitiveTypes.Int64, Metadata: arrow.NewMetadata([]string{"PARQUET:field_id"}, []string{fmt.Sprint(posFieldID)})},
}, nil)

// writeDeleteFile converts a fragment's deletion vector into a position-
// delete file (created once; an existing one, from an earlier export that
// did not finish, is the same bytes' worth and kept) and describes it.
func writeDeleteFile(ctx context.Context, b blob.Bucket, loc string, f *format.Fragment) (iceberg.DataFile, error) {
	rows, err := format.ReadDeletions(ctx, b, f)
	if err != nil {
		return nil, fmt.Errorf("lakehouse: reading deletion vector of fragment %d: %w", f.ID, err)
	}
	dataPath := loc + "/" + f.Key
	bld := array.NewRecordBuilder(memory.DefaultAllocator, positionDeleteSchema)
	defer bld.Release()
	paths := bld.Field(0).(*array.StringBuilder)
	pos := bld.Field(1).(*array.Int64Builder)
	for _, r := range rows {
		paths.Append(dataPath)
		pos.Append(int64(r))
	}
	rec := bld.NewRecordBatch()
	defer rec.Release()
	var buf bytes.Buffer
	props := parquet.NewWriterProperties(parquet.WithCompression(compress.Codecs.Zstd), parquet.WithStats(true))
	w, err := pqarrow.NewFileWriter(positionDeleteSchema, &buf, props, pqarrow.DefaultWriterProps())
	if err != nil {
		return nil, err
	}
	if err := w.Write(rec); err != nil {
		return nil, err
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	key := layout.DeleteFileKey(f.Deletion.Key)
	size := int64(buf.Len())
	if err := b.PutIfAbsent(ctx, key, buf.Bytes()); errors.Is(err, blob.ErrExists) {
		a, err := b.Attributes(ctx, key)
		if err != nil {
			return nil, err
		}
		size = a.Size
	} else if err != nil {
		return nil, fmt.Errorf("lakehouse: writing %s: %w", key, err)
	}
	db, err := iceberg.NewDataFileBuilder(*iceberg.UnpartitionedSpec, iceberg.EntryContentPosDeletes, loc+"/"+key,
		iceberg.ParquetFile, nil, nil, nil, int64(len(rows)), size)
	if err != nil {
		return nil, err
	}
	// Bounds of file_path equal to the one data file tell readers that the
	// file deletes from that file alone.
	p, _ := iceberg.StringLiteral(dataPath).MarshalBinary()
	return db.LowerBoundValues(map[int][]byte{filePathFieldID: p}).
		UpperBoundValues(map[int][]byte{filePathFieldID: p}).Build(), nil
}
