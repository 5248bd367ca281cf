package walshard_test

import (
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/commit"
	"github.com/stratadb/strata/table"
	"github.com/stratadb/strata/walshard"
)

// A shard's WAL entries, Parquet by default, replay into the table's own
// types when Parquet stores them otherwise (a timestamp in seconds read
// back in milliseconds, a large list as a list): a shard reopened over
// entries it never flushed opens, and its rows read back as appended.
// Before, the replay found "rows of another schema" and refused to open
// the shard, its acknowledged rows with it.
func TestEntriesOfTypesParquetWidensReplay(t *testing.T) {
	b, err := blob.Open(ctx, "mem://")
	if err != nil {
		t.Fatal(err)
	}
	sc := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "at", Type: &arrow.TimestampType{Unit: arrow.Second, TimeZone: "UTC"}, Nullable: true},
		{Name: "tags", Type: arrow.LargeListOf(arrow.BinaryTypes.String), Nullable: true},
	}, nil)
	if _, err := commit.Create(ctx, b, sc, nil, nil); err != nil {
		t.Fatal(err)
	}
	rec, _, err := array.RecordFromJSON(memory.DefaultAllocator, sc, strings.NewReader(
		`[{"id": 1, "at": "2026-12-03T10:00:00Z", "tags": ["a", "b"]}, {"id": 2, "at": null, "tags": null}]`))
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Release()
	s := open(t, b, "w1", walshard.Options{})
	if err := s.Append(ctx, rec); err != nil {
		t.Fatal(err)
	}
	s.Close() // nothing flushed: the rows are in the WAL alone
	again := open(t, b, "w1", walshard.Options{})
	defer again.Close()
	var got []string
	for r, err := range again.ScanFresh(ctx, table.ScanOptions{}) {
		if err != nil {
			t.Fatal(err)
		}
		if !arrow.TypeEqual(r.Column(1).DataType(), sc.Field(1).Type) || !arrow.TypeEqual(r.Column(2).DataType(), sc.Field(2).Type) {
			t.Fatalf("read back as %s", r.Schema())
		}
		data, _ := r.MarshalJSON()
		got = append(got, string(data))
	}
	want, _ := rec.MarshalJSON()
	if strings.Join(got, "") != string(want) {
		t.Fatalf("read back %s, appended %s", got, want)
	}
}
