package engine_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/commit"
	"github.com/stratadb/strata/engine"
	"github.com/stratadb/strata/harness/testenv"
	"github.com/stratadb/strata/table"
	"github.com/stratadb/strata/table/evolve"
	"github.com/stratadb/strata/walshard"
)

// A process appending through its shard while another changes the
// table's schema: after a change that takes nothing away (an add) its
// rows go on landing, the shard opening again under the new schema by
// itself; after a drop, a row naming the dropped column is refused by
// name and nothing of it is stored. Before, the shard acknowledged it
// under the schema it opened with, and the merge stored it without the
// column.
func TestAnAppendThroughAShardFollowsSchemaChangesOfAnotherProcess(t *testing.T) {
	b, err := blob.Open(ctx, "mem://")
	if err != nil {
		t.Fatal(err)
	}
	sc := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}, {Name: "z", Type: arrow.BinaryTypes.String, Nullable: true}}, nil)
	if _, err := commit.Create(ctx, b, sc, nil, nil); err != nil {
		t.Fatal(err)
	}
	// A lease of a nanosecond: every write checks the schema.
	db, err := engine.Open(ctx, b, &engine.Options{Log: quiet,
		Shard: walshard.Options{Shard: "w1", SchemaLease: time.Nanosecond, FlushInterval: time.Hour}})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	other, err := commit.OpenTable(ctx, b, &commit.Options{SchemaWait: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	row := func(id int64) error {
		bld := array.NewRecordBuilder(testenv.Allocator(t), sc)
		defer bld.Release()
		bld.Field(0).(*array.Int64Builder).Append(id)
		bld.Field(1).(*array.StringBuilder).Append("z of " + string(rune('0'+id)))
		rec := bld.NewRecordBatch()
		defer rec.Release()
		_, err := db.Append(ctx, engine.AppendOptions{}, rec)
		return err
	}
	if err := row(1); err != nil {
		t.Fatal(err)
	}
	if _, err := other.Alter(ctx, evolve.ColumnChange{Op: evolve.AddColumn, Column: "y", Type: arrow.PrimitiveTypes.Int64}); err != nil {
		t.Fatal(err)
	}
	if err := row(2); err != nil {
		t.Fatalf("an append after another process added a column: %v", err)
	}
	if _, err := other.Alter(ctx, evolve.ColumnChange{Op: evolve.DropColumn, Column: "z"}); err != nil {
		t.Fatal(err)
	}
	err = row(3)
	if !errors.Is(err, evolve.ErrBadInput) || !strings.Contains(err.Error(), `"z"`) {
		t.Fatalf("an append naming a column another process dropped: %v, want a refusal naming z", err)
	}
	if err := db.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	snap, err := table.Open(ctx, b, nil)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := snap.Count(ctx, nil); err != nil || n.Rows != 2 {
		t.Fatalf("rows in the table: %d, %v; want 2", n, err)
	}
}
