package server_test

import (
	"net/http"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/stratadb/strata/client"
	"github.com/stratadb/strata/harness/testenv"
	"github.com/stratadb/strata/server"
)

// An upsert through the server replaces rows by key, and an update sets
// columns of the rows a filter matches, rows the server acknowledged into
// its own shard and not yet merged included; a key twice in one upsert, or
// a null for a non-nullable column, is refused (400) with nothing
// committed.
func TestUpsertThroughTheServer(t *testing.T) {
	f := start(t, "file://"+t.TempDir(), server.Options{})
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "reward", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
	}, nil)
	batch := func(ids []int64, rewards []float64) arrow.RecordBatch {
		b := array.NewRecordBuilder(testenv.Allocator(t), schema)
		defer b.Release()
		b.Field(0).(*array.Int64Builder).AppendValues(ids, nil)
		b.Field(1).(*array.Float64Builder).AppendValues(rewards, nil)
		return b.NewRecordBatch()
	}
	if _, err := f.c.CreateTable(ctx, "t", schema); err != nil {
		t.Fatal(err)
	}
	rec := batch([]int64{1, 2, 3}, []float64{0.1, 0.2, 0.3})
	defer rec.Release()
	if _, err := f.c.Append(ctx, "t", rec); err != nil { // in the server's shard
		t.Fatal(err)
	}
	up := batch([]int64{2, 3, 4}, []float64{2, 3, 4})
	defer up.Release()
	res, err := f.c.Upsert(ctx, "t", []string{"id"}, up)
	if err != nil || res.Rows != 3 || res.Replaced != 2 || res.Version == 0 {
		t.Fatalf("upsert: %+v %v", res, err)
	}
	recs, err := f.c.Scan(ctx, "t", client.ScanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got := map[int64]float64{}
	n := 0
	for _, r := range recs {
		for i := range int(r.NumRows()) {
			got[r.Column(0).(*array.Int64).Value(i)] = r.Column(1).(*array.Float64).Value(i)
			n++
		}
		r.Release()
	}
	if n != 4 || got[1] != 0.1 || got[2] != 2 || got[3] != 3 || got[4] != 4 {
		t.Fatalf("after the upsert: %d rows, %v", n, got)
	}
	twice := batch([]int64{5, 5}, []float64{1, 2})
	defer twice.Release()
	if _, err := f.c.Upsert(ctx, "t", []string{"id"}, twice); !client.IsStatus(err, http.StatusBadRequest) {
		t.Fatalf("an upsert with a key twice: %v, want 400", err)
	}
	if _, err := f.c.Upsert(ctx, "t", []string{"nope"}, up); !client.IsStatus(err, http.StatusBadRequest) {
		t.Fatalf("an upsert by a column the table lacks: %v, want 400", err)
	}
	if info, err := f.c.Versions(ctx, "t", 1, true); err != nil || len(info) != 1 || info[0].Version != res.Version || info[0].Kind != "upsert" {
		t.Fatalf("the latest version after refused upserts: %+v %v (the upsert made v%d)", info, err, res.Version)
	}
	// An update through the server: rows it acknowledged are updated too.
	more := batch([]int64{7}, []float64{0.7})
	defer more.Release()
	if _, err := f.c.Append(ctx, "t", more); err != nil {
		t.Fatal(err)
	}
	ur, err := f.c.Update(ctx, "t", "id >= 4", map[string]any{"reward": 9.5})
	if err != nil || ur.Updated != 2 || ur.Version <= res.Version {
		t.Fatalf("update: %+v %v", ur, err)
	}
	recs, err = f.c.Scan(ctx, "t", client.ScanOptions{Filter: "reward = 9.5"})
	if err != nil {
		t.Fatal(err)
	}
	n = 0
	for _, r := range recs {
		n += int(r.NumRows())
		r.Release()
	}
	if n != 2 {
		t.Fatalf("%d rows with the updated reward, want 2", n)
	}
	if _, err := f.c.Update(ctx, "t", "id >= 4", map[string]any{"id": nil}); !client.IsStatus(err, http.StatusBadRequest) {
		t.Fatalf("an update of a non-nullable column to null: %v, want 400", err)
	}
}

// An upsert through the server's shard (through=shard) is acknowledged
// from the WAL: a fresh scan shows one row per key at once, the rows the
// server acknowledged before with those keys hidden; once merged (a
// checkpoint), the table holds one row per key, the last upsert's; sent
// again under its name it stores nothing twice.
func TestUpsertThroughTheServersShard(t *testing.T) {
	f := start(t, "file://"+t.TempDir(), server.Options{})
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "reward", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
	}, nil)
	batch := func(ids []int64, rewards []float64) arrow.RecordBatch {
		b := array.NewRecordBuilder(testenv.Allocator(t), schema)
		defer b.Release()
		b.Field(0).(*array.Int64Builder).AppendValues(ids, nil)
		b.Field(1).(*array.Float64Builder).AppendValues(rewards, nil)
		return b.NewRecordBatch()
	}
	if _, err := f.c.CreateTable(ctx, "t", schema); err != nil {
		t.Fatal(err)
	}
	rec := batch([]int64{1, 2, 3}, []float64{0.1, 0.2, 0.3})
	defer rec.Release()
	if _, err := f.c.Append(ctx, "t", rec); err != nil {
		t.Fatal(err)
	}
	up := batch([]int64{2, 3, 4}, []float64{2, 3, 4})
	defer up.Release()
	res, err := f.c.UpsertThroughShard(ctx, "t", []string{"id"}, up)
	if err != nil || res.Rows != 3 || res.Shard == "" || res.Version != 0 {
		t.Fatalf("upsert through the shard: %+v %v", res, err)
	}
	again := batch([]int64{3}, []float64{30})
	defer again.Release()
	if _, err := f.c.UpsertThroughShard(ctx, "t", []string{"id"}, again); err != nil {
		t.Fatal(err)
	}
	want := map[int64]float64{1: 0.1, 2: 2, 3: 30, 4: 4}
	read := func(what string, fresh bool) {
		t.Helper()
		recs, err := f.c.Scan(ctx, "t", client.ScanOptions{Fresh: fresh})
		if err != nil {
			t.Fatal(err)
		}
		got := map[int64][]float64{}
		for _, r := range recs {
			for i := range int(r.NumRows()) {
				id := r.Column(0).(*array.Int64).Value(i)
				got[id] = append(got[id], r.Column(1).(*array.Float64).Value(i))
			}
			r.Release()
		}
		for id, w := range want {
			if len(got[id]) != 1 || got[id][0] != w {
				t.Errorf("%s: id %d has %v, want one %v", what, id, got[id], w)
			}
		}
		if len(got) != len(want) {
			t.Errorf("%s: ids %v, want %v", what, got, want)
		}
	}
	read("a fresh scan before the merge", true)
	if err := f.c.CheckpointLSM(ctx, "t"); err != nil {
		t.Fatal(err)
	}
	read("the table after a checkpoint", false)
	if _, err := f.c.UpsertThroughShard(ctx, "t", []string{"bad"}, again); !client.IsStatus(err, http.StatusBadRequest) {
		t.Fatalf("an upsert through the shard by a column the table lacks: %v, want 400", err)
	}
	if _, err := f.c.Upsert(ctx, "t", []string{"id"}, again); err != nil {
		t.Fatal(err)
	}
	read("after a direct upsert of the same row", false)
}
