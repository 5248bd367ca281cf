package commit_test

import (
	"errors"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/commit"
	"github.com/stratadb/strata/table/evolve"
)

// The library refuses a reserved column name as the command line and the
// server do: Create and Overwrite with a *evolve.ReservedNameError naming
// the column, Alter where it adds or renames to one.
func TestAReservedColumnNameIsRefusedByTheLibrary(t *testing.T) {
	b, err := blob.Open(ctx, "mem://")
	if err != nil {
		t.Fatal(err)
	}
	bad := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}, {Name: "_change", Type: arrow.BinaryTypes.String}}, nil)
	_, err = commit.Create(ctx, b, bad, nil, nil)
	var re *evolve.ReservedNameError
	if !errors.As(err, &re) || re.Column != "_change" || !errors.Is(err, evolve.ErrUnsupportedSchema) {
		t.Fatalf("create with a _change column: %v", err)
	}
	good := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}}, nil)
	if _, err := commit.Create(ctx, b, good, nil, nil); err != nil {
		t.Fatal(err)
	}
	tb, err := commit.OpenTable(ctx, b, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tb.Overwrite(ctx, bad); !errors.As(err, &re) {
		t.Fatalf("overwrite with a _change column: %v", err)
	}
	_, err = tb.Alter(ctx, evolve.ColumnChange{Op: evolve.AddColumn, Column: "_version", Type: arrow.PrimitiveTypes.Uint64})
	if !errors.Is(err, evolve.ErrBadSchemaChange) || !errors.As(err, &re) || re.Column != "_version" {
		t.Fatalf("alter adding _version: %v", err)
	}
	_, err = tb.Alter(ctx, evolve.ColumnChange{Op: evolve.RenameColumn, Column: "id", To: "_change"})
	if !errors.As(err, &re) || re.Column != "_change" {
		t.Fatalf("alter renaming id to _change: %v", err)
	}
}
