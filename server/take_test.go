package server_test

import (
	"encoding/base64"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/stratadb/strata/api"
	"github.com/stratadb/strata/server"
)

// A take by a key that matches many rows keeps them within what a read
// may hold of the budget, or is refused (413 too_large) before passing it;
// a binary column's keys are base64, as JSON rows carry binaries (the Go
// client sends []byte so); a body with a field a take does not know, or
// more after it, is a 400, not a take of something else.
func TestATakeHoldsItsRowsWithinTheBudgetAndReadsItsBodyStrictly(t *testing.T) {
	f := start(t, "file://"+t.TempDir(), server.Options{MemoryBudget: 32 << 20})
	if code, body := raw(t, f, "PUT", "/api/v1/tables/h", "application/json",
		`{"fields":[{"name":"id","type":"int64"},{"name":"b","type":"bool"},{"name":"bin","type":"binary"},{"name":"blob","type":"binary"}]}`, ""); code != 201 {
		t.Fatalf("create: %d %s", code, body)
	}
	sch := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}, {Name: "b", Type: arrow.FixedWidthTypes.Boolean},
		{Name: "bin", Type: arrow.BinaryTypes.Binary}, {Name: "blob", Type: arrow.BinaryTypes.Binary}}, nil)
	bld := array.NewRecordBuilder(memory.DefaultAllocator, sch)
	for id := range int64(2000) {
		bld.Field(0).(*array.Int64Builder).Append(id)
		bld.Field(1).(*array.BooleanBuilder).Append(true)
		bld.Field(2).(*array.BinaryBuilder).Append([]byte{0xff, 0, byte(id), byte(id >> 8)})
		p := make([]byte, 8<<10)
		for i := range p {
			p[i] = byte(uint32(id*7919+int64(i)*2654435761) >> 13)
		}
		bld.Field(3).(*array.BinaryBuilder).Append(p)
	}
	rec := bld.NewRecordBatch()
	bld.Release()
	defer rec.Release()
	if _, err := f.c.Append(ctx, "h", rec); err != nil {
		t.Fatal(err)
	}
	if err := f.c.CheckpointLSM(ctx, "h"); err != nil {
		t.Fatal(err)
	}
	// 2,000 rows of 8 KiB match true: past what a read may hold of 32 MiB.
	if code, body := raw(t, f, "POST", "/api/v1/tables/h/take", "application/json", `{"column":"b","keys":[true],"columns":["id","blob"]}`, ""); code != 413 || !strings.Contains(body, api.CodeTooLarge) {
		t.Fatalf("take of 16 MiB of rows with a budget of 32 MiB: %d %s", code, body)
	}
	key := base64.StdEncoding.EncodeToString([]byte{0xff, 0, 7, 0})
	if code, body := raw(t, f, "POST", "/api/v1/tables/h/take?format=jsonl", "application/json", `{"column":"bin","keys":["`+key+`"],"columns":["id"]}`, ""); code != 200 || strings.TrimSpace(body) != `{"id":7}` {
		t.Fatalf("take by a base64 binary key: %d %s", code, body)
	}
	took, err := f.c.Take(ctx, "h", api.TakeRequest{Column: "bin", Keys: []any{[]byte{0xff, 0, 9, 0}}, Columns: []string{"id"}})
	if err != nil || len(took) != 1 || took[0].NumRows() != 1 || took[0].Column(0).(*array.Int64).Value(0) != 9 {
		t.Fatalf("Go client take by []byte: %v %v", took, err)
	}
	for _, rec := range took {
		rec.Release()
	}
	for _, body := range []string{
		`{"column":"bin","keys":["not base64!"]}`,
		`{"column":"id","key":[1]}`,
		`{"column":"id","keys":[1],"colums":["id"]}`,
		`{"column":"id","keys":[1]} trailing`,
		`{"column":"id","keys":[1]}{"column":"id","keys":[2]}`,
		`{"column":"id","keys":[18446744073709551616]}`,
	} {
		if code, out := raw(t, f, "POST", "/api/v1/tables/h/take", "application/json", body, ""); code != 400 {
			t.Fatalf("take %s: %d %s, want 400", body, code, out)
		}
	}
}
