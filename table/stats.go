package table

import (
	"bytes"
	"math"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
)

// maxStatLen bounds recorded string and binary statistics: longer values
// are not recorded (a fragment of 2 KiB blobs gains nothing from them).
const maxStatLen = 64

// statsAcc accumulates one column's statistics over batches.
type statsAcc struct {
	name     string
	min, max *Value
	nulls    int64
	tooLong  bool
}

func (a *statsAcc) see(v Value) {
	if a.min == nil || Compare(v, *a.min) < 0 {
		c := v
		c.X = bytes.Clone(v.X) // v.X may point into an Arrow buffer
		a.min = &c
	}
	if a.max == nil || Compare(v, *a.max) > 0 {
		c := v
		c.X = bytes.Clone(v.X)
		a.max = &c
	}
}

// ValueAt returns row i of arr as a Value; ok is false for a null or an
// unsupported type.
func ValueAt(arr arrow.Array, i int) (Value, bool) {
	if arr.IsNull(i) {
		return Value{}, false
	}
	switch a := arr.(type) {
	case *array.Int64:
		return Int(a.Value(i)), true
	case *array.Int32:
		return Int(int64(a.Value(i))), true
	case *array.Int16:
		return Int(int64(a.Value(i))), true
	case *array.Int8:
		return Int(int64(a.Value(i))), true
	case *array.Timestamp:
		return Int(int64(a.Value(i))), true
	case *array.Date32:
		return Int(int64(a.Value(i))), true
	case *array.Date64:
		return Int(int64(a.Value(i))), true
	case *array.Time32:
		return Int(int64(a.Value(i))), true
	case *array.Time64:
		return Int(int64(a.Value(i))), true
	case *array.Duration:
		return Int(int64(a.Value(i))), true
	case *array.Uint64:
		return Uint(a.Value(i)), true
	case *array.Uint32:
		return Uint(uint64(a.Value(i))), true
	case *array.Uint16:
		return Uint(uint64(a.Value(i))), true
	case *array.Uint8:
		return Uint(uint64(a.Value(i))), true
	case *array.Float64:
		return Float(a.Value(i)), true
	case *array.Float32:
		return Float(float64(a.Value(i))), true
	case *array.String:
		return String(a.Value(i)), true
	case *array.LargeString:
		return String(a.Value(i)), true
	case *array.Binary:
		return Bytes(a.Value(i)), true
	case *array.LargeBinary:
		return Bytes(a.Value(i)), true
	case *array.Boolean:
		return Bool(a.Value(i)), true
	}
	return Value{}, false
}

func (a *statsAcc) add(arr arrow.Array) {
	a.nulls += int64(arr.NullN())
	if KindOf(arr.DataType()) == KindNone || a.tooLong {
		return
	}
	for i := 0; i < arr.Len(); i++ {
		v, ok := ValueAt(arr, i)
		if !ok {
			continue
		}
		if v.Kind == KindFloat && math.IsNaN(v.F) {
			continue
		}
		if v.Kind == KindFloat && math.IsInf(v.F, 0) {
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

func (a *statsAcc) result() ColumnStats {
	return ColumnStats{Name: a.name, Min: a.min, Max: a.max, Nulls: a.nulls}
}
