package format

import (
	"bytes"
	"math"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/stratadb/strata/table/value"
)

// maxStatLen bounds recorded string and binary statistics: longer values
// are not recorded (a fragment of 2 KiB blobs gains nothing from them).
const maxStatLen = 64

// StatsAcc accumulates one column's statistics over batches.
type StatsAcc struct {
	Name     string
	min, max *value.Value
	nulls    int64
	tooLong  bool
}

func (a *StatsAcc) see(v value.Value) {
	if a.min == nil || value.Compare(v, *a.min) < 0 {
		c := v
		c.X = bytes.Clone(v.X) // v.X may point into an Arrow buffer
		a.min = &c
	}
	if a.max == nil || value.Compare(v, *a.max) > 0 {
		c := v
		c.X = bytes.Clone(v.X)
		a.max = &c
	}
}

// ValueAt returns row i of arr as a Value; ok is false for a null or an
// unsupported type.
func ValueAt(arr arrow.Array, i int) (value.Value, bool) {
	if arr.IsNull(i) {
		return value.Value{}, false
	}
	switch a := arr.(type) {
	case *array.Int64:
		return value.Int(a.Value(i)), true
	case *array.Int32:
		return value.Int(int64(a.Value(i))), true
	case *array.Int16:
		return value.Int(int64(a.Value(i))), true
	case *array.Int8:
		return value.Int(int64(a.Value(i))), true
	case *array.Timestamp:
		return value.Int(int64(a.Value(i))), true
	case *array.Date32:
		return value.Int(int64(a.Value(i))), true
	case *array.Date64:
		return value.Int(int64(a.Value(i))), true
	case *array.Time32:
		return value.Int(int64(a.Value(i))), true
	case *array.Time64:
		return value.Int(int64(a.Value(i))), true
	case *array.Duration:
		return value.Int(int64(a.Value(i))), true
	case *array.Uint64:
		return value.Uint(a.Value(i)), true
	case *array.Uint32:
		return value.Uint(uint64(a.Value(i))), true
	case *array.Uint16:
		return value.Uint(uint64(a.Value(i))), true
	case *array.Uint8:
		return value.Uint(uint64(a.Value(i))), true
	case *array.Float64:
		return value.Float(a.Value(i)), true
	case *array.Float32:
		return value.Float(float64(a.Value(i))), true
	case *array.String:
		return value.String(a.Value(i)), true
	case *array.LargeString:
		return value.String(a.Value(i)), true
	case *array.Binary:
		return value.Bytes(a.Value(i)), true
	case *array.LargeBinary:
		return value.Bytes(a.Value(i)), true
	case *array.Boolean:
		return value.Bool(a.Value(i)), true
	}
	return value.Value{}, false
}

func (a *StatsAcc) Add(arr arrow.Array) {
	a.nulls += int64(arr.NullN())
	if value.KindOf(arr.DataType()) == value.KindNone || a.tooLong {
		return
	}
	for i := 0; i < arr.Len(); i++ {
		v, ok := ValueAt(arr, i)
		if !ok {
			continue
		}
		if v.Kind == value.KindFloat && math.IsNaN(v.F) {
			continue
		}
		if v.Kind == value.KindFloat && math.IsInf(v.F, 0) {
			// JSON holds no infinity: the column gets no bounds (a
			// fragment without them is never pruned), as a long string's.
			a.tooLong, a.min, a.max = true, nil, nil
			return
		}
		if len(v.S) > maxStatLen || len(v.X) > maxStatLen {
			a.tooLong, a.min, a.max = true, nil, nil
			return
		}
		a.see(v)
	}
}

func (a *StatsAcc) Result() ColumnStats {
	return ColumnStats{Name: a.Name, Min: a.min, Max: a.max, Nulls: a.nulls}
}
