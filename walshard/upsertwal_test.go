package walshard

import (
	"context"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/commit"
	"github.com/stratadb/strata/harness/testenv"
	"github.com/stratadb/strata/table"
	"github.com/stratadb/strata/table/format"
	"github.com/stratadb/strata/walshard/wal"
)

// An entry of upserts that no Upsert would write — a key twice among its
// rows, by a column no longer in the table — written straight into the
// WAL is replayed by the next owner and merged without wedging the shard:
// of a key twice, the last row stays; keys the table lacks leave the rows
// appended.
func TestHostileUpsertEntriesDoNotWedgeTheShard(t *testing.T) {
	ctx := context.Background()
	schema := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}, {Name: "v", Type: arrow.BinaryTypes.String}}, nil)
	b, err := blob.Open(ctx, "mem://")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := commit.Create(ctx, b, schema, nil, nil); err != nil {
		t.Fatal(err)
	}
	rows := func(vals ...string) arrow.RecordBatch {
		rb := array.NewRecordBuilder(testenv.Arrow, schema)
		defer rb.Release()
		for i, v := range vals {
			rb.Field(0).(*array.Int64Builder).Append(7)
			rb.Field(1).(*array.StringBuilder).Append(v + string(rune('a'+i)))
		}
		return rb.NewRecordBatch()
	}
	s, err := Open(ctx, b, &Options{Shard: "h"})
	if err != nil {
		t.Fatal(err)
	}
	pos := s.mu.wal.nextPos
	for i, keys := range [][]string{{"id"}, {"gone"}} {
		rec := rows("x", "y")
		data, err := wal.EncodeEntry(&wal.Entry{Kind: wal.KindData, Epoch: s.epoch, Position: pos + uint64(i), Id: format.NewID(), Batches: []arrow.RecordBatch{rec}, Keys: keys}, schema, false)
		rec.Release()
		if err != nil {
			t.Fatal(err)
		}
		if err := b.PutIfAbsent(ctx, s.l.WalKey(pos+uint64(i)), data); err != nil {
			t.Fatal(err)
		}
	}
	s.Close()
	s, err = Open(ctx, b, &Options{Shard: "h"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Drain(ctx); err != nil {
		t.Fatalf("draining a shard with hostile upsert entries: %v", err)
	}
	snap, err := table.Open(ctx, b, nil)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for rec, err := range snap.Scan(ctx, table.ScanOptions{Columns: []string{"v"}}) {
		if err != nil {
			t.Fatal(err)
		}
		for i := range int(rec.NumRows()) {
			got = append(got, rec.Column(0).(*array.String).Value(i))
		}
	}
	// The first entry, keyed by id: one row for id 7, its last ("yb"),
	// which the second entry's rows (keyed by no column the table has)
	// are appended beside.
	if len(got) != 3 || got[0] != "yb" {
		t.Fatalf("the table holds %q, want [yb xa yb]", got)
	}
}
