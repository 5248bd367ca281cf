package value

import (
	"bytes"
	"cmp"
	"fmt"
	"strconv"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
)

// Kind is the class of a scalar: every Arrow type Strata keeps
// statistics for and filters on maps to one.
type Kind uint8

// Value kinds.
const (
	KindNone   Kind = iota
	KindInt         // signed integers, timestamps, dates
	KindUint        // unsigned integers
	KindFloat       // float32, float64
	KindString      // utf8, large utf8
	KindBytes       // binary, large binary
	KindBool
)

// Value is a typed scalar: a statistic or a predicate's operand. In
// manifests it is a JSON object {"k": kind, and one of "i", "u", "f", "s",
// "x" (base64 bytes), "b"}.
type Value struct {
	Kind Kind    `json:"k"`
	I    int64   `json:"i,omitempty"`
	U    uint64  `json:"u,omitempty"`
	F    float64 `json:"f,omitempty"`
	S    string  `json:"s,omitempty"` // KindString
	X    []byte  `json:"x,omitempty"` // KindBytes
	B    bool    `json:"b,omitempty"`
}

// Int, Uint, Float, String, Bytes and Bool make Values.
func Int(v int64) Value     { return Value{Kind: KindInt, I: v} }
func Uint(v uint64) Value   { return Value{Kind: KindUint, U: v} }
func Float(v float64) Value { return Value{Kind: KindFloat, F: v} }
func String(v string) Value { return Value{Kind: KindString, S: v} }
func Bytes(v []byte) Value  { return Value{Kind: KindBytes, X: v} }
func Bool(v bool) Value     { return Value{Kind: KindBool, B: v} }

func (v Value) String() string {
	switch v.Kind {
	case KindInt:
		return fmt.Sprint(v.I)
	case KindUint:
		return fmt.Sprint(v.U)
	case KindFloat:
		// A float prints so that it reads back as a float: 1.0, not 1, and
		// -0.0, not -0 (which a filter reads as the integer 0).
		s := strconv.FormatFloat(v.F, 'g', -1, 64)
		if !strings.ContainsAny(s, ".eIN") {
			s += ".0"
		}
		return s
	case KindString:
		return fmt.Sprintf("%q", v.S)
	case KindBytes:
		return fmt.Sprintf("0x%x", v.X)
	case KindBool:
		return fmt.Sprint(v.B)
	}
	return "none"
}

// Ints returns the integers vs as values (keys for a take, say).
func Ints(vs ...int64) []Value {
	out := make([]Value, len(vs))
	for i, v := range vs {
		out[i] = Int(v)
	}
	return out
}

// Compare orders two values of the same kind (-1, 0, +1).
func Compare(a, b Value) int {
	switch a.Kind {
	case KindInt:
		return cmp.Compare(a.I, b.I)
	case KindUint:
		return cmp.Compare(a.U, b.U)
	case KindFloat:
		return cmp.Compare(a.F, b.F)
	case KindString:
		return cmp.Compare(a.S, b.S)
	case KindBytes:
		return bytes.Compare(a.X, b.X)
	case KindBool:
		if a.B == b.B {
			return 0
		}
		if !a.B {
			return -1
		}
		return 1
	}
	return 0
}

// KindOf returns the value kind of an Arrow type, or KindNone.
func KindOf(t arrow.DataType) Kind {
	switch t.ID() {
	case arrow.INT8, arrow.INT16, arrow.INT32, arrow.INT64, arrow.TIMESTAMP, arrow.DATE32, arrow.DATE64, arrow.TIME32, arrow.TIME64, arrow.DURATION:
		return KindInt
	case arrow.UINT8, arrow.UINT16, arrow.UINT32, arrow.UINT64:
		return KindUint
	case arrow.FLOAT32, arrow.FLOAT64:
		return KindFloat
	case arrow.STRING, arrow.LARGE_STRING:
		return KindString
	case arrow.BINARY, arrow.LARGE_BINARY:
		return KindBytes
	case arrow.BOOL:
		return KindBool
	}
	return KindNone
}
