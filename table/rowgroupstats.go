package table

import (
	"slices"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/parquet/metadata"
)

// rowGroupStats reads a row group's Parquet statistics for the columns the
// predicate uses.
func (p *scanPlan) rowGroupStats(rg *metadata.RowGroupMetaData, lay *layout) statsFunc {
	schema := p.s.m.Schema()
	return func(col string) (*ColumnStats, int64) {
		i := slices.Index(p.read, col)
		if i < 0 {
			return nil, rg.NumRows()
		}
		if lay.first[i] < 0 {
			// Added after the fragment was written: every row null.
			return &ColumnStats{Name: col, Nulls: rg.NumRows()}, rg.NumRows()
		}
		cc, err := rg.ColumnChunk(lay.first[i])
		if err != nil {
			return nil, rg.NumRows()
		}
		st, err := cc.Statistics()
		if err != nil || st == nil {
			return nil, rg.NumRows()
		}
		cs := &ColumnStats{Name: col, Nulls: st.NullCount()}
		if !st.HasNullCount() {
			return nil, rg.NumRows()
		}
		colType := schema.Field(schema.FieldIndices(col)[0]).Type
		if !parquetKeepsValues(colType) {
			return nil, rg.NumRows()
		}
		kind := KindOf(colType)
		if st.HasMinMax() {
			var lo, hi Value
			ok := true
			switch s := st.(type) {
			case *metadata.Int64Statistics:
				lo, hi, ok = Int(s.Min()), Int(s.Max()), kind == KindInt
			case *metadata.Int32Statistics:
				lo, hi, ok = Int(int64(s.Min())), Int(int64(s.Max())), kind == KindInt
			case *metadata.Float64Statistics:
				lo, hi, ok = Float(s.Min()), Float(s.Max()), kind == KindFloat
			case *metadata.Float32Statistics:
				lo, hi, ok = Float(float64(s.Min())), Float(float64(s.Max())), kind == KindFloat
			case *metadata.ByteArrayStatistics:
				lo, hi = Bytes(s.Min()), Bytes(s.Max())
				if kind == KindString {
					lo, hi = String(string(s.Min())), String(string(s.Max()))
				}
				ok = kind == KindString || kind == KindBytes
			case *metadata.BooleanStatistics:
				lo, hi, ok = Bool(s.Min()), Bool(s.Max()), kind == KindBool
			default:
				ok = false
			}
			if ok {
				cs.Min, cs.Max = &lo, &hi
			}
		}
		return cs, rg.NumRows()
	}
}

// parquetKeepsValues is false for the types Parquet stores in another
// unit (seconds become milliseconds): a row group's statistics for them
// are not in the table's values.
func parquetKeepsValues(t arrow.DataType) bool {
	switch t := t.(type) {
	case *arrow.TimestampType:
		return t.Unit != arrow.Second
	case *arrow.Time32Type:
		return t.Unit != arrow.Second
	}
	return true
}
