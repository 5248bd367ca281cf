package table

import (
	"bytes"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
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
		ok = a.Name == b.Name && a.Nullable == b.Nullable && arrow.TypeEqual(a.Type, b.Type)
	}
	if ok {
		return nil
	}
	return &SchemaError{Want: want.String(), Got: got.String()}
}
