package table_test

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/table/format"
	"github.com/stratadb/strata/table/fragment"
)

// FooterValueAt reads a footer's value from the object's tail alone, as
// FooterValue reads it from the whole object: in one ranged read when the
// footer is within 64 KiB of the end, in two when it is longer; a
// truncated or foreign object is an error naming it, never a panic.
func TestAFootersValueIsReadFromTheTail(t *testing.T) {
	b, err := blob.Open(ctx, "mem://")
	if err != nil {
		t.Fatal(err)
	}
	rec := structBatch()
	defer rec.Release()
	for _, size := range []int{10, 200 << 10} { // a short value, and one longer than the tail
		value := strings.Repeat("v", size)
		data, _, err := fragment.Encode(structSchema, []arrow.RecordBatch{rec}, func([]byte) (string, string) { return "test.state", value })
		if err != nil {
			t.Fatal(err)
		}
		if err := b.Put(ctx, "obj", bytes.NewReader(data)); err != nil {
			t.Fatal(err)
		}
		c0, _ := blob.StatsOf(b)
		got, ok, err := format.FooterValueAt(ctx, b, "obj", int64(len(data)), "test.state")
		if err != nil || !ok || got != value {
			t.Fatalf("a value of %d bytes: ok %v, %d bytes, %v", size, ok, len(got), err)
		}
		c1, _ := blob.StatsOf(b)
		want := int64(1)
		if size > 64<<10 {
			want = 2
		}
		if c1.Sub(c0).RangeGets != want {
			t.Fatalf("a value of %d bytes read in %d ranged reads, want %d", size, c1.Sub(c0).RangeGets, want)
		}
		if _, ok, err := format.FooterValueAt(ctx, b, "obj", int64(len(data)), "absent"); ok || err != nil {
			t.Fatalf("an absent key: ok %v, %v", ok, err)
		}
		dec, err := format.DecodedBytes(data)
		if err != nil || dec < 500*8 {
			t.Fatalf("decoded bytes of 500 rows: %d, %v", dec, err)
		}
	}
	for name, data := range map[string][]byte{
		"truncated":   []byte("PAR1 not a footer at all PAR1"),
		"not parquet": []byte("just some bytes that are not Parquet"),
	} {
		if err := b.Put(ctx, name, bytes.NewReader(data)); err != nil {
			t.Fatal(err)
		}
		if _, _, err := format.FooterValueAt(ctx, b, name, int64(len(data)), "k"); err == nil || !strings.Contains(err.Error(), name) {
			t.Fatalf("%s: %v, want an error naming it", name, err)
		}
		if _, err := format.DecodedBytes(data); err == nil {
			t.Fatalf("%s: decoded bytes without an error", name)
		}
	}
	if _, _, err := format.FooterValueAt(ctx, b, "missing", 100, "k"); !errors.Is(err, blob.ErrNotFound) {
		t.Fatalf("a missing object: %v", err)
	}
}
