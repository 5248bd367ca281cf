package server_test

import (
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/stratadb/strata/api"
	"github.com/stratadb/strata/client"
	"github.com/stratadb/strata/server"
)

// Over HTTP, an alter sets and clears the cluster key, which the table's
// description names; a key the table cannot take, and a key index on a
// clustered table, are 400s that change nothing.
func TestClusterKeyOverHTTP(t *testing.T) {
	f := start(t, "file://"+t.TempDir(), server.Options{})
	schema := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}, {Name: "run", Type: arrow.BinaryTypes.String},
		{Name: "step", Type: arrow.PrimitiveTypes.Int64}}, nil)
	if _, err := f.c.CreateTable(ctx, "t", schema); err != nil {
		t.Fatal(err)
	}
	if _, err := f.c.AppendJSONLines(ctx, "t", []byte(`{"id":1,"run":"b","step":2}`+"\n"+`{"id":2,"run":"a","step":1}`+"\n")); err != nil {
		t.Fatal(err)
	}
	refused := func(what string, err error, words string) {
		t.Helper()
		var ae *client.Error
		if !errors.As(err, &ae) || ae.Status != http.StatusBadRequest || !strings.Contains(ae.Message, words) {
			t.Fatalf("%s: %v, want a 400 saying %q", what, err, words)
		}
	}
	_, err := f.c.Alter(ctx, "t", api.SchemaChange{Op: "cluster_by", Columns: []string{"run", "nope"}})
	refused("a key of a missing column", err, `the table has no column "nope"`)
	// A misspelt change is refused, never taken for another: a cluster_by
	// naming its column in column (not columns) would clear the key.
	_, err = f.c.Alter(ctx, "t", api.SchemaChange{Op: "cluster_by", Column: "step"})
	refused("cluster_by with column", err, `cluster_by takes "columns"`)
	_, err = f.c.Alter(ctx, "t", api.SchemaChange{Op: "cluster_by", Columns: []string{"step"}, Type: "int64"})
	refused("cluster_by with a type", err, "nothing else")
	_, err = f.c.Alter(ctx, "t", api.SchemaChange{Op: "add", Column: "x", Type: "string", Columns: []string{"step"}})
	refused("add with columns", err, `"columns" is for cluster_by`)
	_, err = f.c.Alter(ctx, "t", api.SchemaChange{Op: "add", Column: "x", Type: "string", Columns: []string{}})
	refused("add with empty columns", err, `"columns" is for cluster_by`)
	info, err := f.c.Alter(ctx, "t", api.SchemaChange{Op: "cluster_by", Columns: []string{"run", "step"}})
	if err != nil || !slices.Equal(info.ClusterBy, []string{"run", "step"}) {
		t.Fatalf("alter cluster_by: %+v, %v", info, err)
	}
	_, err = f.c.CreateIndex(ctx, "t", "id")
	refused("an index on a clustered table", err, "cluster key")
	if err := f.c.Compact(ctx, "t"); err != nil {
		t.Fatal(err)
	}
	info, err = f.c.Alter(ctx, "t", api.SchemaChange{Op: "cluster_by", Columns: []string{}})
	if err != nil || len(info.ClusterBy) != 0 {
		t.Fatalf("alter clearing the key: %+v, %v", info, err)
	}
	if d, err := f.c.Describe(ctx, "t"); err != nil || d.Rows != 2 || len(d.ClusterBy) != 0 {
		t.Fatalf("describe: %+v, %v", d, err)
	}
}
