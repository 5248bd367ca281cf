package e2e

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/stratadb/strata/api"
	"github.com/stratadb/strata/client"
	"github.com/stratadb/strata/harness/testenv"
)

// A server whose shard opened under a schema with column z, on MinIO,
// goes on taking rows after z is dropped by another process (strata
// alter) or taken away by a restore sent to it: a row naming z after the
// change answered is refused by name (HTTP 400, through the Go client's
// own retry of the 503 that finds the shard's schema stale), never
// acknowledged and stored without z. Rows without z go on landing; every
// acknowledged row is in the table once, with the values it was sent.
func TestAColumnTakenAwayIsRefusedByAServerThatOpenedBefore(t *testing.T) {
	root := testenv.MinIO(t).URL(t)
	port := freePort(t)
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	srv := run(t, "strata", "serve", "--bucket", root, "--listen", addr, "--flush-interval", "1h", "--merge-interval", "1h")
	// After the parallel subtests, which run once this function returned.
	t.Cleanup(func() { srv.signal(syscall.SIGKILL); <-srv.done })
	waitUp(t, "http://"+addr+"/healthz")
	c, err := client.New("http://"+addr, nil)
	if err != nil {
		t.Fatal(err)
	}
	withZ := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}, {Name: "z", Type: arrow.BinaryTypes.String, Nullable: true}}, nil)
	refused := func(t *testing.T, name string, line string) {
		t.Helper()
		_, err := c.AppendJSONLines(ctx, name, []byte(line+"\n"))
		var e *client.Error
		if !errors.As(err, &e) || e.Status != http.StatusBadRequest || !strings.Contains(e.Message, `"z"`) {
			t.Fatalf("%s after z was taken away: %v, want a 400 naming z", line, err)
		}
		t.Logf("refused: %s", e.Message)
	}
	appended := func(t *testing.T, name string, line string) {
		t.Helper()
		if n, err := c.AppendJSONLines(ctx, name, []byte(line+"\n")); err != nil || n != 1 {
			t.Fatalf("%s: %d rows, %v", line, n, err)
		}
	}
	t.Run("dropped by another process", func(t *testing.T) {
		t.Parallel()
		if _, err := c.CreateTable(ctx, "dropped", withZ); err != nil {
			t.Fatal(err)
		}
		appended(t, "dropped", `{"id":1,"z":"before"}`) // the server's shard opens under (id, z)
		alter := run(t, "strata", "alter", strings.Replace(root, "?", "/dropped?", 1), "--drop-column", "z")
		alter.wait(t, time.Minute)
		if alter.cmd.ProcessState.ExitCode() != 0 {
			t.Fatalf("alter: %s", alter.stderr())
		}
		refused(t, "dropped", `{"id":5,"z":"AFTER-drop"}`)
		appended(t, "dropped", `{"id":6}`)
		checkRows(t, c, "dropped", []string{"1", "6"})
	})
	t.Run("taken away by a restore through the server", func(t *testing.T) {
		t.Parallel()
		if _, err := c.CreateTable(ctx, "restored", arrow.NewSchema(withZ.Fields()[:1], nil)); err != nil {
			t.Fatal(err)
		}
		appended(t, "restored", `{"id":1}`)
		if _, err := c.Alter(ctx, "restored", api.SchemaChange{Op: "add", Column: "z", Type: "string"}); err != nil {
			t.Fatal(err)
		}
		appended(t, "restored", `{"id":2,"z":"with z"}`)
		if _, err := c.Restore(ctx, "restored", 1); err != nil {
			t.Fatal(err)
		}
		refused(t, "restored", `{"id":3,"z":"AFTER-restore"}`)
		appended(t, "restored", `{"id":4}`)
		checkRows(t, c, "restored", []string{"1", "2", "4"}) // unmerged rows are merged on top of the restore
	})
}

// checkRows merges what the server's shard holds and checks the table's
// ids and that no column but id is left.
func checkRows(t *testing.T, c *client.Client, name string, want []string) {
	t.Helper()
	if err := c.CheckpointLSM(ctx, name); err != nil {
		t.Fatal(err)
	}
	recs, err := c.Scan(ctx, name, client.ScanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, rec := range recs {
		if rec.NumCols() != 1 {
			t.Errorf("columns %v, want id alone", rec.Schema())
		}
		for _, id := range rec.Column(0).(*array.Int64).Int64Values() {
			got = append(got, fmt.Sprint(id))
		}
		rec.Release()
	}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Fatalf("ids %v, want %v", got, want)
	}
}
