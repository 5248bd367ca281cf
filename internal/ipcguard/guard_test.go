package ipcguard_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/ipc"

	"github.com/stratadb/strata/harness/testenv"
	"github.com/stratadb/strata/internal/ipcguard"
)

// A schema as Arrow's writer serializes it passes; one claiming a body,
// cut short, or absent is refused.
func TestCheckSchema(t *testing.T) {
	sc := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "s", Type: arrow.StructOf(arrow.Field{Name: "a", Type: arrow.ListOf(arrow.BinaryTypes.String)}), Nullable: true},
	}, nil)
	var buf bytes.Buffer
	w := ipc.NewWriter(&buf, ipc.WithSchema(sc))
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := ipcguard.CheckSchema(buf.Bytes()); err != nil {
		t.Fatalf("a serialized schema: %v", err)
	}
	if err := ipcguard.CheckSchema(testenv.SchemaMessageClaimingBody(0)); err != nil {
		t.Fatalf("a schema of no fields claiming no body: %v", err)
	}
	for what, data := range map[string][]byte{
		"claiming a 32 GiB body": testenv.SchemaMessageClaimingBody(1 << 35),
		"cut short":              buf.Bytes()[:buf.Len()/2],
		"empty":                  nil,
	} {
		if err := ipcguard.CheckSchema(data); !errors.Is(err, ipcguard.ErrRefused) {
			t.Errorf("%s: %v, want ErrRefused", what, err)
		}
	}
}
