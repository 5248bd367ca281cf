package table

import (
	"slices"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/parquet/metadata"

	"github.com/stratadb/strata/table/expr"
	"github.com/stratadb/strata/table/format"
	"github.com/stratadb/strata/table/value"
)

// rowGroupStats reads a row group's Parquet statistics for the columns the
// predicate uses.
func (p *scanPlan) rowGroupStats(rg *metadata.RowGroupMetaData, lay *layout) expr.StatsFunc {
	schema := p.s.m.Schema()
	return func(col string) (*format.ColumnStats, int64) {
		i := slices.Index(p.read, col)
		if i < 0 {
			return nil, rg.NumRows()
		}
		if lay.first[i] < 0 {
			// Added after the fragment was written: every row null.
			return &format.ColumnStats{Name: col, Nulls: rg.NumRows()}, rg.NumRows()
		}
		cc, err := rg.ColumnChunk(lay.first[i])
		if err != nil {
			return nil, rg.NumRows()
		}
		st, err := cc.Statistics()
		if err != nil || st == nil {
			return nil, rg.NumRows()
		}
		cs := &format.ColumnStats{Name: col, Nulls: st.NullCount()}
		if !st.HasNullCount() {
			return nil, rg.NumRows()
		}
		colType := schema.Field(schema.FieldIndices(col)[0]).Type
		if !parquetKeepsValues(colType) {
			return nil, rg.NumRows()
		}
		kind := value.KindOf(colType)
		if minMaxKnown(st) {
			var lo, hi value.Value
			ok := true
			switch s := st.(type) {
			case *metadata.Int64Statistics:
				lo, hi, ok = value.Int(s.Min()), value.Int(s.Max()), kind == value.KindInt
			case *metadata.Int32Statistics:
				lo, hi, ok = value.Int(int64(s.Min())), value.Int(int64(s.Max())), kind == value.KindInt
			case *metadata.Float64Statistics:
				lo, hi, ok = value.Float(s.Min()), value.Float(s.Max()), kind == value.KindFloat
			case *metadata.Float32Statistics:
				lo, hi, ok = value.Float(float64(s.Min())), value.Float(float64(s.Max())), kind == value.KindFloat
			case *metadata.ByteArrayStatistics:
				lo, hi = value.Bytes(s.Min()), value.Bytes(s.Max())
				if kind == value.KindString {
					lo, hi = value.String(string(s.Min())), value.String(string(s.Max()))
				}
				ok = kind == value.KindString || kind == value.KindBytes
			case *metadata.BooleanStatistics:
				lo, hi, ok = value.Bool(s.Min()), value.Bool(s.Max()), kind == value.KindBool
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

// minMaxKnown: st's min and max both bound its column chunk's values. A
// Parquet writer leaves out a binary bound longer than its limit
// (arrow-go's: 4 KiB) and keeps the other, and arrow-go reads the one
// left out as empty: a true lower bound, but no upper one. So a binary
// chunk whose max reads empty is taken to have no bounds (which costs
// only chunks whose values are all empty).
func minMaxKnown(st metadata.TypedStatistics) bool {
	if !st.HasMinMax() {
		return false
	}
	switch s := st.(type) {
	case *metadata.ByteArrayStatistics:
		return len(s.Max()) > 0
	case *metadata.FixedLenByteArrayStatistics:
		return len(s.Max()) > 0
	}
	return true
}
