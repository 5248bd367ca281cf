package evolve

import (
	"bytes"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/stratadb/strata/internal/ipcguard"
)

// EncodeSchema serialises s as an Arrow IPC stream holding only the
// schema message, the form manifests store it in.
func EncodeSchema(s *arrow.Schema) ([]byte, error) {
	var buf bytes.Buffer
	w := ipc.NewWriter(&buf, ipc.WithSchema(s))
	if err := w.Close(); err != nil {
		return nil, fmt.Errorf("table: encode schema: %w", err)
	}
	return buf.Bytes(), nil
}

// DecodeSchema parses what EncodeSchema wrote.
func DecodeSchema(data []byte) (s *arrow.Schema, err error) {
	defer func() {
		// The IPC reader trusts its flatbuffers; a damaged one may panic.
		if r := recover(); r != nil {
			s, err = nil, fmt.Errorf("schema message is damaged: %v", r)
		}
	}()
	// Nor can a recover undo what it allocates for the lengths it finds:
	// those are checked first.
	if err := ipcguard.CheckSchema(data); err != nil {
		return nil, err
	}
	r, err := ipc.NewReader(bytes.NewReader(data), ipc.WithAllocator(memory.DefaultAllocator))
	if err != nil {
		return nil, err
	}
	defer r.Release()
	return r.Schema(), nil
}

// CheckSchema returns a *SchemaError unless got has the same fields (names,
// types, nullability, in order) as want. Schema metadata is ignored.
func CheckSchema(want, got *arrow.Schema) error {
	ok := want.NumFields() == got.NumFields()
	for i := 0; ok && i < want.NumFields(); i++ {
		a, b := want.Field(i), got.Field(i)
		ok = a.Name == b.Name && a.Nullable == b.Nullable && TypesEqual(a.Type, b.Type)
	}
	if ok {
		return nil
	}
	return &SchemaError{Want: want.String(), Got: got.String()}
}

// TypesEqual reports whether two Arrow types are the same, as
// arrow.TypeEqual means it, but without its fallback to reflect.DeepEqual
// for nested types: that compares private caches too (a timestamp type
// that has resolved its time zone differs from one that has not), so
// that equal types would compare unequal.
func TypesEqual(a, b arrow.DataType) bool {
	if a == b {
		return true
	}
	if a == nil || b == nil || a.ID() != b.ID() {
		return false
	}
	switch a := a.(type) {
	case *arrow.StructType:
		bs := b.(*arrow.StructType)
		if a.NumFields() != bs.NumFields() {
			return false
		}
		for i := range a.NumFields() {
			fa, fb := a.Field(i), bs.Field(i)
			if fa.Name != fb.Name || fa.Nullable != fb.Nullable || !TypesEqual(fa.Type, fb.Type) {
				return false
			}
		}
		return true
	case *arrow.MapType:
		bm := b.(*arrow.MapType)
		return a.KeysSorted == bm.KeysSorted && a.ItemField().Nullable == bm.ItemField().Nullable &&
			TypesEqual(a.KeyType(), bm.KeyType()) && TypesEqual(a.ItemType(), bm.ItemType())
	case *arrow.FixedSizeListType:
		bf := b.(*arrow.FixedSizeListType)
		return a.Len() == bf.Len() && a.ElemField().Nullable == bf.ElemField().Nullable && TypesEqual(a.Elem(), bf.Elem())
	case arrow.ListLikeType:
		bl := b.(arrow.ListLikeType)
		return a.ElemField().Nullable == bl.ElemField().Nullable && TypesEqual(a.Elem(), bl.Elem())
	case *arrow.DictionaryType:
		bd := b.(*arrow.DictionaryType)
		return a.Ordered == bd.Ordered && TypesEqual(a.IndexType, bd.IndexType) && TypesEqual(a.ValueType, bd.ValueType)
	}
	return arrow.TypeEqual(a, b)
}
