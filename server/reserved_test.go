package server_test

import (
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/stratadb/strata/api"
	"github.com/stratadb/strata/client"
	"github.com/stratadb/strata/server"
)

// Over HTTP as on the command line, a column cannot take a name the change
// feed adds to its rows (_change, _version): the create and the alter
// that would make one are 400s naming the column and the reserved names.
func TestAReservedColumnNameIsRefusedOverHTTP(t *testing.T) {
	f := start(t, "file://"+t.TempDir(), server.Options{})
	refused := func(what string, err error, column string) {
		t.Helper()
		var ae *client.Error
		if !errors.As(err, &ae) || ae.Status != http.StatusBadRequest || !strings.Contains(ae.Message, `column "`+column+`"`) ||
			!strings.Contains(ae.Message, "the names _change, _version and _unit are reserved") {
			t.Fatalf("%s: %v", what, err)
		}
	}
	bad := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}, {Name: "_version", Type: arrow.PrimitiveTypes.Int64}}, nil)
	_, err := f.c.CreateTable(ctx, "bad", bad)
	refused("create with a _version column", err, "_version")
	var ae *client.Error
	if errors.As(err, &ae) && ae.Code != api.CodeUnsupportedSchema {
		t.Fatalf("create with a _version column: code %s, want %s", ae.Code, api.CodeUnsupportedSchema)
	}
	if _, err := f.c.Describe(ctx, "bad"); !client.IsStatus(err, http.StatusNotFound) {
		t.Fatalf("the refused create left a table: %v", err)
	}
	good := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}}, nil)
	if _, err := f.c.CreateTable(ctx, "good", good); err != nil {
		t.Fatal(err)
	}
	_, err = f.c.Alter(ctx, "good", api.SchemaChange{Op: "add", Column: "_change", Type: "string"})
	refused("alter adding _change", err, "_change")
	_, err = f.c.Alter(ctx, "good", api.SchemaChange{Op: "rename", Column: "id", To: "_version"})
	refused("alter renaming id to _version", err, "_version")
}

// An add without a type is refused by a message that says so, not one
// that prints the missing type as Go's %!s(<nil>).
func TestAnAddWithoutATypeIsRefusedInPlainWords(t *testing.T) {
	f := start(t, "file://"+t.TempDir(), server.Options{})
	good := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}}, nil)
	if _, err := f.c.CreateTable(ctx, "good", good); err != nil {
		t.Fatal(err)
	}
	_, err := f.c.Alter(ctx, "good", api.SchemaChange{Op: "add", Column: "y"})
	var ae *client.Error
	if !errors.As(err, &ae) || ae.Status != http.StatusBadRequest || strings.Contains(ae.Message, "%!") ||
		!strings.Contains(ae.Message, "add y: give the new column's type") {
		t.Fatalf("add y without a type: %v", err)
	}
}
