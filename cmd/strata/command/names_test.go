package command

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stratadb/strata/api"
	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/client"
	"github.com/stratadb/strata/compactor"
	"github.com/stratadb/strata/engine/iceberg"
	"github.com/stratadb/strata/harness/rollouts"
	"github.com/stratadb/strata/harness/testenv"
	"github.com/stratadb/strata/job"
	"github.com/stratadb/strata/server"
	"github.com/stratadb/strata/table"
	"github.com/stratadb/strata/walshard"
)

// Any legal table name — named like a table's own folders ("_versions",
// "data"), holding such a name ("run_versions"), nested in other tables
// or in folders named like a table's ("x/_shards/y") — is found and
// served by every part: created by strata create (which refuses, naming
// the table in the way, exactly the names that would share a folder with
// a table's own objects), listed by strata tables, found by the Job,
// whose pass adopts and merges a dead worker's acknowledged rows and
// exports the table's Iceberg view, and listed, described and scanned
// through the server.
func TestEveryPartFindsAndServesEveryLegalTableName(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	root := "file://" + t.TempDir()
	names := []string{"run_versions", "_versions", "data", "x/_shards/y", "job_versions/t", "t", "t/eval"}
	segs := []string{"t", "run_versions", "_versions", "data", "_shards", "_deletions", "_indices", "_compactor", "_refs", "x", "a.b", "-z"}
	for range 8 {
		var path []string
		for range 1 + rng.IntN(3) {
			path = append(path, segs[rng.IntN(len(segs))])
		}
		names = append(names, strings.Join(path, "/"))
	}
	created, rows := createTables(t, root, names, 7)
	t.Logf("tables: %q", created)
	// strata tables
	code, out, errOut := run(t, nil, "tables", root)
	var listed []string
	for _, line := range strings.Split(strings.TrimSpace(out), "\n")[1:] {
		f := strings.Fields(line)
		if len(f) != 2 || f[1] != "1" {
			t.Fatalf("strata tables: line %q", line)
		}
		listed = append(listed, f[0])
	}
	if code != 0 || !slices.Equal(listed, created) {
		t.Fatalf("strata tables: exit %d %q %s\nwant %q", code, listed, errOut, created)
	}
	jobFindsAndAdopts(t, root, created)
	serverServes(t, root, created, rows)
}

// deadWorker appends n acknowledged rows to the table at u through a
// shard, and dies: the rows are in its WAL only.
func deadWorker(t *testing.T, u string, w, n int) {
	t.Helper()
	b, err := blob.Open(context.Background(), u)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	s, err := walshard.Open(context.Background(), b, &walshard.Options{Shard: "dead"})
	if err != nil {
		t.Fatal(err)
	}
	rec := rollouts.Batch(testenv.Allocator(t), 42, w, 0, n)
	defer rec.Release()
	if err := s.Append(context.Background(), rec); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if v, err := table.LatestVersion(context.Background(), b); err != nil || v != 1 {
		t.Fatalf("%s: version %d %v: the rows must not be in the table yet", u, v, err)
	}
}

// createTables creates the tables names under root with strata create,
// each with a dead worker's acknowledged rows, and returns those created,
// sorted, and their rows. The first must of them are created; a later
// one may be refused for its place only.
func createTables(t *testing.T, root string, names []string, must int) ([]string, map[string]int64) {
	t.Helper()
	schemaFile := filepath.Join(t.TempDir(), "rollouts.json")
	sj, _ := json.Marshal(api.SchemaOf(rollouts.Schema))
	if err := os.WriteFile(schemaFile, sj, 0o644); err != nil {
		t.Fatal(err)
	}
	rows := map[string]int64{}
	var created []string
	for i, name := range names {
		if _, ok := rows[name]; ok {
			continue
		}
		code, out, errOut := run(t, nil, "create", root+"/"+name, "--schema", schemaFile)
		if i < must && code != 0 {
			t.Fatalf("create %q: exit %d %s %s", name, code, out, errOut)
		}
		if code != 0 {
			if !strings.Contains(errOut, "would lie in") && !strings.Contains(errOut, "holds table") {
				t.Fatalf("create %q refused, not for its place: exit %d %s", name, code, errOut)
			}
			t.Logf("refused %q: %s", name, strings.TrimSpace(errOut))
			continue
		}
		created = append(created, name)
		rows[name] = int64(10 + i)
		deadWorker(t, root+"/"+name, i, 10+i)
	}
	slices.Sort(created)
	return created, rows
}

// jobFindsAndAdopts checks that the Job finds the tables created under
// root, and that a pass adopts every dead worker's rows and exports every
// table's Iceberg view, writing nothing at the root.
func jobFindsAndAdopts(t *testing.T, root string, created []string) {
	t.Helper()
	ctx := context.Background()
	found, err := compactor.DiscoverTables(ctx, blob.Open, root)
	if err != nil {
		t.Fatal(err)
	}
	var wantURLs []string
	for _, name := range created {
		wantURLs = append(wantURLs, root+"/"+name)
	}
	if !slices.Equal(found, wantURLs) {
		t.Fatalf("the Job found %q\nwant %q", found, wantURLs)
	}
	time.Sleep(50 * time.Millisecond) // quiet for longer than the adoption age
	sum, err := job.RunOnce(ctx, &job.Options{Tables: found, AdoptAfter: 20 * time.Millisecond, NoGC: true, Iceberg: true, Export: iceberg.ExportKept,
		Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil || sum.Adopted != len(created) {
		t.Fatalf("the pass: adopted %d of %d: %v", sum.Adopted, len(created), err)
	}
	for _, o := range sum.Outcomes {
		if o.Iceberg == "" {
			t.Errorf("%s: no Iceberg view exported", o.Table)
		}
	}
	if _, err := os.Stat(filepath.Join(strings.TrimPrefix(root, "file://"), "_compactor", "lease")); !os.IsNotExist(err) {
		t.Fatalf("the pass wrote at the bucket's root: %v", err)
	}
}

// serverServes checks that a server over root lists the tables created,
// and describes and scans each with every row its dead worker acknowledged.
func serverServes(t *testing.T, root string, created []string, rows map[string]int64) {
	t.Helper()
	ctx := context.Background()
	srv, err := server.New(&server.Options{Bucket: root, Instance: "test", Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	defer hs.Close()
	defer srv.Shutdown(ctx)
	c, err := client.New(hs.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	tables, err := c.Tables(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var listed []string
	for _, l := range tables {
		listed = append(listed, l.Name)
	}
	if !slices.Equal(listed, created) {
		t.Fatalf("the server lists %q\nwant %q", listed, created)
	}
	for _, name := range created {
		info, err := c.Describe(ctx, name)
		if err != nil || info.Rows != rows[name] {
			t.Fatalf("the server's %q: %+v %v; want %d rows, every one the dead worker acknowledged", name, info, err, rows[name])
		}
		recs, err := c.Scan(ctx, name, client.ScanOptions{Columns: []string{"id"}})
		if err != nil {
			t.Fatal(err)
		}
		var n int64
		for _, r := range recs {
			n += r.NumRows()
			r.Release()
		}
		if n != rows[name] {
			t.Fatalf("the server scans %d rows of %q, want %d", n, name, rows[name])
		}
	}
}
