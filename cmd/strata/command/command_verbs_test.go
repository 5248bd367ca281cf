package command

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/commit"
	"github.com/stratadb/strata/compactor"
	"github.com/stratadb/strata/harness/rollouts"
	"github.com/stratadb/strata/harness/testenv"
	"github.com/stratadb/strata/table/format"
	"github.com/stratadb/strata/walshard"
)

func TestDemoThenEveryVerb(t *testing.T) {
	u := "file://" + t.TempDir() + "/rollouts"
	code, out, errOut := run(t, nil, "demo", u, "--workers", "3", "--appends", "6", "--rows", "20")
	if code != 0 {
		t.Fatalf("demo: exit %d\n%s\n%s", code, out, errOut)
	}
	for _, want := range []string{"created the rollouts table", "wrote 360 rows", "compaction: fragments", "a sample of rows", "look further"} {
		if !strings.Contains(out, want) {
			t.Fatalf("demo output lacks %q:\n%s", want, out)
		}
	}
	// A second run adds workers w03..w05.
	if code, out, _ := run(t, nil, "demo", u, "--workers", "3", "--appends", "6", "--rows", "20"); code != 0 || strings.Contains(out, "created") {
		t.Fatalf("second demo: exit %d\n%s", code, out)
	}

	code, out, _ = run(t, nil, "stats", u, "--json")
	var st TableStats
	if code != 0 || json.Unmarshal([]byte(out), &st) != nil {
		t.Fatalf("stats: exit %d\n%s", code, out)
	}
	if st.Rows != 720 || st.Fragments != 1 || len(st.Shards) != 6 || st.Compaction.TotalCompactions != 2 {
		t.Fatalf("stats %+v", st)
	}
	for _, s := range st.Shards {
		if s.WALLag != 0 || s.PendingGenerations != 0 || s.WALLastWritten == 0 {
			t.Fatalf("shard after the demo: %+v", s)
		}
	}

	code, out, _ = run(t, nil, "scan", u, "--columns", "id,reward", "--filter", "id < 3", "--format", "csv")
	if code != 0 || out != "id,reward\n0,0.657087276732245\n1,0.2505163173505667\n2,0.82452177818938\n" {
		t.Fatalf("scan: exit %d\n%q", code, out)
	}
	code, out, _ = run(t, nil, "scan", u, "--limit", "2", "--format", "jsonl")
	if code != 0 || strings.Count(out, "\n") != 2 || !strings.Contains(out, `"artifact":"`) {
		t.Fatalf("scan jsonl: exit %d\n%s", code, out)
	}
	if code, _, errOut := run(t, nil, "scan", u, "--filter", "reward >"); code != 2 || !strings.Contains(errOut, "bad predicate") {
		t.Fatalf("bad filter: exit %d %s", code, errOut)
	}
	if code, out, _ = run(t, nil, "count", u); code != 0 || out != "720\n" {
		t.Fatalf("count: exit %d %q, want 720", code, out)
	}
	if code, out, _ = run(t, nil, "count", u, "--filter", "id < 3"); code != 0 || out != "3\n" {
		t.Fatalf("count --filter 'id < 3': exit %d %q, want 3", code, out)
	}
	if code, out, _ = run(t, nil, "count", u, "--fresh", "--filter", "id < 3"); code != 0 || out != "3\n" {
		t.Fatalf("count --fresh: exit %d %q, want 3", code, out)
	}
	if code, _, errOut := run(t, nil, "count", u, "--filter", "nosuch = 1"); code != 2 || !strings.Contains(errOut, "nosuch") {
		t.Fatalf("count of an unknown column: exit %d %s", code, errOut)
	}

	code, out, _ = run(t, nil, "take", u, "1000000005", "--columns", "id,worker,step")
	if code != 0 || !strings.Contains(out, "1000000005  w01     5") {
		t.Fatalf("take: exit %d\n%s", code, out)
	}
	// By a string key: every row whose worker is w01, as many as count
	// finds; a key that is not a value of the column, and a column that
	// holds no keys, are usage errors.
	code, want, _ := run(t, nil, "count", u, "--filter", "worker = 'w01'")
	code2, out, _ := run(t, nil, "take", u, "w01", "--column", "worker", "--columns", "worker", "--format", "csv")
	if code != 0 || code2 != 0 || strings.Count(out, "w01\n") == 0 || fmt.Sprint(strings.Count(out, "w01\n"))+"\n" != want {
		t.Fatalf("take by worker: exit %d, %d rows of w01; count says %q", code2, strings.Count(out, "w01\n"), want)
	}
	if code, _, errOut := run(t, nil, "take", u, "abc"); code != 2 || !strings.Contains(errOut, `key "abc" is not a value of column "id"`) {
		t.Fatalf("take of a string from an integer column: exit %d %s", code, errOut)
	}
	if code, _, errOut := run(t, nil, "take", u, "0.5", "--column", "reward"); code != 2 || !strings.Contains(errOut, "not a key column") {
		t.Fatalf("take by a float column: exit %d %s", code, errOut)
	}
	if code, out, _ = run(t, nil, "tag", u, "after-demo"); code != 0 || !strings.Contains(out, "as after-demo") {
		t.Fatalf("tag: %d %s", code, out)
	}
	if code, _, errOut := run(t, nil, "tag", u, "after-demo"); code != 6 || !strings.Contains(errOut, "already exists") {
		t.Fatalf("tag twice: %d %s", code, errOut)
	}
	code, out, _ = run(t, nil, "versions", u, "--detail", "--limit", "3")
	if code != 0 || !strings.Contains(out, "rewrite") || !strings.Contains(out, "after-demo") {
		t.Fatalf("versions: exit %d\n%s", code, out)
	}
	code, out, _ = run(t, nil, "inspect", u)
	var m map[string]any
	if code != 0 || json.Unmarshal([]byte(out), &m) != nil || m["fragments"] == nil || m["transaction"] == nil {
		t.Fatalf("inspect: exit %d\n%s", code, out)
	}
	if code, out, _ = run(t, nil, "compact", u, "--dry-run"); code != 0 || !strings.Contains(out, "0 bins") {
		t.Fatalf("compact --dry-run: %d %s", code, out)
	}
	if code, out, _ = run(t, nil, "gc", u, "--dry-run"); code != 0 || !strings.Contains(out, "would delete") {
		t.Fatalf("gc --dry-run: %d %s", code, out)
	}
	empty := "file://" + t.TempDir()
	if code, _, errOut := run(t, nil, "scan", empty); code != 5 || !strings.Contains(errOut, "no table at "+empty) {
		t.Fatalf("scan of no table: %d %q, want it to name the URL", code, errOut)
	}
	if code, _, errOut := run(t, nil, "stats", "file://"+t.TempDir()); code != 5 || !strings.Contains(errOut, "no table at") {
		t.Fatalf("stats of nothing: %d %s", code, errOut)
	}
}

func TestDemoOnMinIO(t *testing.T) {
	u := testenv.MinIO(t).URL(t)
	code, out, errOut := run(t, nil, "demo", u, "--workers", "2", "--appends", "4", "--rows", "10")
	if code != 0 || !strings.Contains(out, "wrote 80 rows") {
		t.Fatalf("demo on MinIO: exit %d\n%s\n%s", code, out, errOut)
	}
	// Taken by a string key: the 40 rows of worker w01, read from MinIO by
	// the worker column, then those rows' row groups.
	code, out, errOut = run(t, nil, "take", u, "w01", "--column", "worker", "--columns", "worker,step", "--format", "csv")
	if code != 0 || strings.Count(out, "w01,") != 40 {
		t.Fatalf("take by worker on MinIO: exit %d, %d rows\n%s", code, strings.Count(out, "w01,"), errOut)
	}
}

func TestCreateAndAppendFiles(t *testing.T) {
	dir := t.TempDir()
	schema := dir + "/events.json"
	if err := os.WriteFile(schema, []byte(`{"fields":[{"name":"id","type":"int64"},{"name":"msg","type":"string","nullable":true}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	u := "file://" + dir + "/events"
	if code, out, errOut := run(t, nil, "create", u, "--schema", schema); code != 0 || !strings.Contains(out, "created") {
		t.Fatalf("create: %d %s %s", code, out, errOut)
	}
	if code, _, _ := run(t, nil, "create", u, "--schema", schema); code != 6 {
		t.Fatalf("create twice: exit %d", code)
	}
	os.WriteFile(dir+"/a.csv", []byte("id,msg\n1,one\n2,\n3,three\n"), 0o644)
	os.WriteFile(dir+"/b.jsonl", []byte("{\"id\":4,\"msg\":\"four\"}\n{\"id\":5,\"msg\":null}\n"), 0o644)
	if code, out, errOut := run(t, nil, "append", u, dir+"/a.csv", dir+"/b.jsonl"); code != 0 || !strings.Contains(out, "appended 5 rows from 2 files") {
		t.Fatalf("append: %d %s %s", code, out, errOut)
	}
	// Through a shard, and a Parquet file made by this table's own
	// fragments (a copy of one), to show the round trip.
	if code, out, errOut := run(t, nil, "append", u, dir+"/b.jsonl", "--shard", "loader"); code != 0 || !strings.Contains(out, "appended 2 rows") {
		t.Fatalf("append through a shard: %d %s %s", code, out, errOut)
	}
	code, out, _ := run(t, nil, "scan", u, "--format", "csv")
	if code != 0 || strings.Count(out, "\n") != 8 || !strings.Contains(out, "2,\n") {
		t.Fatalf("scan after appends: %d\n%s", code, out)
	}
	frag, _ := filepath.Glob(dir + "/events/data/*.parquet")
	if len(frag) == 0 {
		t.Fatal("no fragment to copy")
	}
	u2 := "file://" + dir + "/copy"
	if code, _, errOut := run(t, nil, "create", u2, "--like", frag[0]); code != 0 {
		t.Fatalf("create --like: %s", errOut)
	}
	if code, out, errOut := run(t, nil, "append", u2, frag[0]); code != 0 || !strings.Contains(out, "appended 5 rows") {
		t.Fatalf("append a Parquet file: %d %s %s", code, out, errOut)
	}
	// All or nothing: a bad row anywhere, in any file, appends nothing,
	// and the error names the file, the line and the column.
	os.WriteFile(dir+"/c.csv", []byte("id,msg\n6,six\n,seven\n"), 0o644)
	os.WriteFile(dir+"/d.jsonl", []byte("{\"id\":8}\n{\"id\":9,\"mgs\":\"typo\"}\n"), 0o644)
	os.WriteFile(dir+"/e.jsonl", []byte("{\"id\":10}\n{\"id\":null}\n"), 0o644)
	for _, c := range []struct{ files, says string }{
		{dir + "/a.csv " + dir + "/c.csv", `c.csv: table: CSV line 3: column "id": null in a non-nullable field`},
		{dir + "/d.jsonl", `d.jsonl: table: JSON line 2: column "mgs": the table has no such column`},
		{dir + "/e.jsonl", `e.jsonl: table: JSON line 2: column "id": null in a non-nullable field`},
	} {
		for _, via := range [][]string{nil, {"--shard", "loader"}} {
			args := append(append([]string{"append", u}, strings.Fields(c.files)...), via...)
			if code, _, errOut := run(t, nil, args...); code != 4 || !strings.Contains(errOut, c.says) || !strings.Contains(errOut, "nothing was appended") {
				t.Fatalf("append %s %v: %d %s", c.files, via, code, errOut)
			}
		}
	}
	if code, out, _ := run(t, nil, "scan", u, "--format", "csv"); code != 0 || strings.Count(out, "\n") != 8 {
		t.Fatalf("refused appends changed the table: %d\n%s", code, out)
	}
	if code, out, errOut := run(t, nil, "append", u, dir+"/d.jsonl", "--ignore-unknown-columns"); code != 0 || !strings.Contains(out, "appended 2 rows") {
		t.Fatalf("append ignoring unknown columns: %d %s %s", code, out, errOut)
	}
	if code, _, errOut := run(t, nil, "append", u2, dir+"/a.csv", dir+"/nope.txt"); code != 2 || !strings.Contains(errOut, "unknown file type") {
		t.Fatalf("unknown file type: %d %s", code, errOut)
	}
	if code, out, _ := run(t, nil, "version"); code != 0 || !strings.HasPrefix(out, "strata ") {
		t.Fatalf("version: %d %s", code, out)
	}
	if code, _, errOut := run(t, nil, "checkpoint", "rollouts"); code != 2 || !strings.Contains(errOut, "--server") {
		t.Fatalf("checkpoint without a server: %d %s", code, errOut)
	}
}

// The table verbs: list the tables of a bucket, delete rows by filter,
// delete a tag, and a compaction refused while another compactor holds the
// table's lease.
func TestTablesDeleteTagDeleteAndTheLease(t *testing.T) {
	dir := t.TempDir()
	root := "file://" + dir
	for _, name := range []string{"alpha", "beta"} {
		if code, out, errOut := run(t, nil, "demo", root+"/"+name, "--workers", "2", "--appends", "2", "--rows", "10"); code != 0 {
			t.Fatalf("demo %s: %d\n%s\n%s", name, code, out, errOut)
		}
	}
	if err := os.MkdirAll(filepath.Join(dir, "not-a-table", "x"), 0o755); err != nil {
		t.Fatal(err)
	}
	code, out, _ := run(t, nil, "tables", root)
	if code != 0 || !strings.Contains(out, "alpha") || !strings.Contains(out, "beta") || strings.Contains(out, "not-a-table") || strings.Count(out, "\n") != 3 {
		t.Fatalf("tables: %d\n%s", code, out)
	}

	u := root + "/alpha"
	if code, _, errOut := run(t, nil, "delete", u); code != 2 || !strings.Contains(errOut, "needs --filter") {
		t.Fatalf("delete without a filter: %d %s", code, errOut)
	}
	code, out, _ = run(t, nil, "scan", u, "--columns", "id", "--filter", "step < 5", "--format", "csv")
	matching := strings.Count(out, "\n") - 1
	if code != 0 || matching <= 0 {
		t.Fatalf("scan before the delete: %d %q", code, out)
	}
	code, out, _ = run(t, nil, "delete", u, "--filter", "step < 5")
	if code != 0 || !strings.Contains(out, fmt.Sprintf("deleted %d rows", matching)) {
		t.Fatalf("delete (%d rows match): %d %s", matching, code, out)
	}
	code, out, _ = run(t, nil, "scan", u, "--columns", "id", "--filter", "step < 5", "--format", "csv")
	if code != 0 || strings.Count(out, "\n") > 1 {
		t.Fatalf("deleted rows still scanned: %d %q", code, out)
	}
	if code, out, _ = run(t, nil, "delete", u, "--filter", "step < 5"); code != 0 || !strings.Contains(out, "no row matched") {
		t.Fatalf("delete again: %d %s", code, out)
	}

	if code, out, _ := run(t, nil, "index", u, "id"); code != 0 || !strings.Contains(out, "indexed") {
		t.Fatalf("index: %d %s", code, out)
	}
	if code, out, _ := run(t, nil, "index", u, "--list"); code != 0 || !strings.Contains(out, "id ") {
		t.Fatalf("index --list: %d %s", code, out)
	}
	if code, _, errOut := run(t, nil, "index", u); code != 2 {
		t.Fatalf("index without a column: %d %s", code, errOut)
	}
	if code, out, _ := run(t, nil, "tag", u, "keep"); code != 0 {
		t.Fatalf("tag: %d %s", code, out)
	}
	if code, out, _ := run(t, nil, "tag", u, "keep", "--delete"); code != 0 || !strings.Contains(out, "deleted tag keep") {
		t.Fatalf("tag --delete: %d %s", code, out)
	}
	if code, _, errOut := run(t, nil, "tag", u, "keep", "--delete"); code != 5 || !strings.Contains(errOut, "not found") {
		t.Fatalf("deleting a missing tag: %d %s", code, errOut)
	}

	b, err := blob.Open(context.Background(), u)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	job, err := compactor.TakeLease(context.Background(), b, "strata-compactor on node-7", time.Hour, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if code, _, errOut := run(t, nil, "compact", u); code != 1 || !strings.Contains(errOut, "strata-compactor on node-7") {
		t.Fatalf("compact under another's lease: %d %s", code, errOut)
	}
	if err := job.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	if code, out, errOut := run(t, nil, "compact", u); code != 0 || !strings.Contains(out, "fragments") {
		t.Fatalf("compact after the release: %d %s %s", code, out, errOut)
	}
}

// STRATA_SERVER, STRATA_TOKEN and STRATA_INSTANCE are read as
// strata-compactor reads its flags (internal/cli): the flag, when given,
// wins.
func TestEnvironmentFlagsAndPrecedence(t *testing.T) {
	t.Setenv("STRATA_SERVER", "http://127.0.0.1:1")
	if code, _, errOut := run(t, nil, "flush", "t"); code != 1 || !strings.Contains(errOut, "127.0.0.1:1") {
		t.Fatalf("from the environment: exit %d\n%s", code, errOut)
	}
	code, _, errOut := run(t, nil, "flush", "t", "--server", "http://127.0.0.1:2")
	if code != 1 || !strings.Contains(errOut, "127.0.0.1:2") || strings.Contains(errOut, "127.0.0.1:1") {
		t.Fatalf("the flag wins: exit %d\n%s", code, errOut)
	}
	t.Setenv("STRATA_SERVER", "localhost:8080")
	if code, _, errOut := run(t, nil, "flush", "t"); code != 2 {
		t.Fatalf("a server address without a scheme: exit %d\n%s", code, errOut)
	}
}

// A write whose outcome is unknown exits 3, apart from failures (1): the
// rows may be stored, and a script that retried on any failure could
// store them twice.
func TestAWriteOfUnknownOutcomeExits3(t *testing.T) {
	rows := t.TempDir() + "/x.jsonl"
	if err := os.WriteFile(rows, []byte("{\"id\":1}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, unknown := range []error{commit.ErrOutcomeUnknown, walshard.ErrAppendUnknown} {
		env := &Env{Open: func(ctx context.Context, u string) (blob.Bucket, error) {
			return nil, fmt.Errorf("the store stopped answering: %w", unknown)
		}}
		if code, _, errOut := run(t, env, "append", "mem://", rows); code != 3 {
			t.Errorf("%v: exit %d, want 3: %s", unknown, code, errOut)
		}
	}
	env := &Env{Open: func(ctx context.Context, u string) (blob.Bucket, error) {
		return nil, errors.New("the store refused")
	}}
	if code, _, _ := run(t, env, "append", "mem://", rows); code != 1 {
		t.Errorf("a plain failure: exit %d, want 1", code)
	}
}

// repair --shard names a shard's lost WAL entry and changes nothing; with
// --drop-missing it sets the entry aside and merges the shard's other rows;
// then the shard checks clean.
func TestRepairAShardsLostWALEntry(t *testing.T) {
	ctx := context.Background()
	u := "file://" + t.TempDir() + "/t"
	b, err := blob.Open(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if _, err := commit.Create(ctx, b, rollouts.Schema, nil, nil); err != nil {
		t.Fatal(err)
	}
	s, err := walshard.Open(ctx, b, &walshard.Options{Shard: "w1"})
	if err != nil {
		t.Fatal(err)
	}
	for i := range int64(3) {
		rec := rollouts.Batch(testenv.Allocator(t), 42, 0, i*10, 10)
		err := s.Append(ctx, rec)
		rec.Release()
		if err != nil {
			t.Fatal(err)
		}
	}
	s.Close()
	if err := b.Delete(ctx, "_shards/w1/wal/"+format.Inverted(3)); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := run(t, nil, "repair", u, "--shard", "w1")
	if code != 1 || !strings.Contains(out, "position 3") || !strings.Contains(errOut, "--drop-missing") {
		t.Fatalf("repair --shard: exit %d\n%s\n%s", code, out, errOut)
	}
	code, out, errOut = run(t, nil, "repair", u, "--shard", "w1", "--drop-missing")
	if code != 0 || !strings.Contains(out, "set aside WAL position 3") || !strings.Contains(out, "replayed 20 rows") {
		t.Fatalf("repair --shard --drop-missing: exit %d\n%s\n%s", code, out, errOut)
	}
	code, out, _ = run(t, nil, "repair", u, "--shard", "w1")
	if code != 0 || !strings.Contains(out, "every WAL entry") {
		t.Fatalf("repair --shard after: exit %d\n%s", code, out)
	}
	code, out, _ = run(t, nil, "stats", u, "--json")
	var st TableStats
	if code != 0 || json.Unmarshal([]byte(out), &st) != nil || st.Rows != 20 {
		t.Fatalf("stats after the repair: exit %d\n%s", code, out)
	}
	if code, _, errOut := run(t, nil, "repair", u, "--shard", "w2"); code != 5 || !strings.Contains(errOut, `unknown shard "w2"`) {
		t.Fatalf("repair --shard of a shard the table never had: exit %d\n%s", code, errOut)
	}
}

// strata changes prints each version's inserted and deleted rows with
// their change and version, and nothing for a compaction.
func TestChangesPrintsInsertsAndDeletesNotCompactions(t *testing.T) {
	dir := t.TempDir()
	schema := dir + "/events.json"
	if err := os.WriteFile(schema, []byte(`{"fields":[{"name":"id","type":"int64"},{"name":"msg","type":"string","nullable":true}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	u := "file://" + dir + "/events"
	if code, _, errOut := run(t, nil, "create", u, "--schema", schema); code != 0 {
		t.Fatalf("create: %s", errOut)
	}
	os.WriteFile(dir+"/a.csv", []byte("id,msg\n1,one\n2,two\n"), 0o644)
	os.WriteFile(dir+"/b.csv", []byte("id,msg\n3,three\n"), 0o644)
	for _, f := range []string{"a.csv", "b.csv"} {
		if code, _, errOut := run(t, nil, "append", u, dir+"/"+f); code != 0 {
			t.Fatalf("append %s: %s", f, errOut)
		}
	}
	if code, _, errOut := run(t, nil, "delete", u, "--filter", "id = 2"); code != 0 {
		t.Fatalf("delete: %s", errOut)
	}
	if code, _, errOut := run(t, nil, "compact", u); code != 0 {
		t.Fatalf("compact: %s", errOut)
	}
	code, out, errOut := run(t, nil, "changes", u, "--from", "1", "--format", "jsonl")
	want := `{"id":1,"msg":"one","_change":"insert","_version":2}
{"id":2,"msg":"two","_change":"insert","_version":2}
{"id":3,"msg":"three","_change":"insert","_version":3}
{"id":2,"msg":"two","_change":"delete","_version":4}
`
	if code != 0 || out != want {
		t.Fatalf("changes --from 1: exit %d\n%s\nwant\n%s%s", code, out, want, errOut)
	}
	if code, out, _ := run(t, nil, "changes", u, "--from", "4"); code != 0 || strings.Contains(out, "insert") || strings.Contains(out, "delete") {
		t.Fatalf("changes after the delete, over the compaction alone: exit %d\n%s", code, out)
	}
	if code, _, errOut := run(t, nil, "changes", u); code != 2 || !strings.Contains(errOut, "--from") {
		t.Fatalf("changes without --from: exit %d %s", code, errOut)
	}
	// --filter keeps the changed rows it matches, a delete by the values
	// it deleted; a column added since reads as null in older rows.
	code, out, errOut = run(t, nil, "changes", u, "--from", "0", "--filter", "id >= 2", "--format", "jsonl", "--columns", "id")
	want = `{"id":2,"_change":"insert","_version":2}
{"id":3,"_change":"insert","_version":3}
{"id":2,"_change":"delete","_version":4}
`
	if code != 0 || out != want {
		t.Fatalf("changes --filter 'id >= 2': exit %d\n%s\nwant\n%s%s", code, out, want, errOut)
	}
	if code, _, errOut := run(t, nil, "alter", u, "--add-column", "score:float64"); code != 0 {
		t.Fatalf("alter: %s", errOut)
	}
	os.WriteFile(dir+"/c.csv", []byte("id,msg,score\n4,four,0.5\n"), 0o644)
	if code, _, errOut := run(t, nil, "append", u, dir+"/c.csv"); code != 0 {
		t.Fatalf("append c.csv: %s", errOut)
	}
	code, out, errOut = run(t, nil, "changes", u, "--from", "0", "--filter", "score IS NOT NULL OR id = 1", "--format", "jsonl", "--columns", "id,score")
	want = `{"id":1,"score":null,"_change":"insert","_version":2}
{"id":4,"score":0.5,"_change":"insert","_version":7}
`
	if code != 0 || out != want {
		t.Fatalf("changes --filter on a column added since: exit %d\n%s\nwant\n%s%s", code, out, want, errOut)
	}
	if code, _, errOut := run(t, nil, "changes", u, "--from", "0", "--filter", "id >>= 2"); code != 2 || !strings.Contains(errOut, ">") {
		t.Fatalf("changes with a bad filter: exit %d %s", code, errOut)
	}
}

// strata follow --consumer prints what is new since its last run, marks
// each run of versions, and records its position: run again, it prints
// only what landed since; strata stats shows it with its lag.
func TestFollowAsANamedConsumerPrintsEachChangeOnce(t *testing.T) {
	dir := t.TempDir()
	schema := dir + "/events.json"
	if err := os.WriteFile(schema, []byte(`{"fields":[{"name":"id","type":"int64"}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	u := "file://" + dir + "/events"
	if code, _, errOut := run(t, nil, "create", u, "--schema", schema); code != 0 {
		t.Fatalf("create: %s", errOut)
	}
	appendIDs := func(name, ids string) {
		t.Helper()
		os.WriteFile(dir+"/"+name, []byte("id\n"+ids), 0o644)
		if code, _, errOut := run(t, nil, "append", u, dir+"/"+name); code != 0 {
			t.Fatalf("append %s: %s", name, errOut)
		}
	}
	appendIDs("a.csv", "1\n2\n")
	follow := func() string {
		t.Helper()
		code, out, errOut := run(t, nil, "follow", u, "--consumer", "trainer", "--exit-when-idle", "--poll", "1ms")
		if code != 0 {
			t.Fatalf("follow: exit %d %s", code, errOut)
		}
		return out
	}
	first := follow()
	want := `{"id":1,"_change":"insert","_version":2}
{"id":2,"_change":"insert","_version":2}
{"_change":"through","_version":2}
`
	if first != want {
		t.Fatalf("the first follow printed\n%s\nwant\n%s", first, want)
	}
	if again := follow(); again != "" {
		t.Fatalf("a follow with nothing new printed %q", again)
	}
	appendIDs("b.csv", "3\n")
	if code, _, errOut := run(t, nil, "delete", u, "--filter", "id = 1"); code != 0 {
		t.Fatalf("delete: %s", errOut)
	}
	want = `{"id":3,"_change":"insert","_version":3}
{"id":1,"_change":"delete","_version":4}
{"_change":"through","_version":4}
`
	if next := follow(); next != want {
		t.Fatalf("the next follow printed\n%s\nwant\n%s", next, want)
	}
	code, out, _ := run(t, nil, "stats", u)
	if code != 0 || !strings.Contains(out, "consumer trainer") || !strings.Contains(out, "through v4 (lag 0 versions)") {
		t.Fatalf("stats: %d\n%s", code, out)
	}
	if code, _, errOut := run(t, nil, "follow", u); code != 2 || !strings.Contains(errOut, "--from") {
		t.Fatalf("follow without --from or --consumer: exit %d %s", code, errOut)
	}
}

// strata restore commits an earlier version's rows, by version or tag.
func TestRestoreByVersionAndTag(t *testing.T) {
	dir := t.TempDir()
	schema := dir + "/events.json"
	if err := os.WriteFile(schema, []byte(`{"fields":[{"name":"id","type":"int64"}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	u := "file://" + dir + "/events"
	if code, _, errOut := run(t, nil, "create", u, "--schema", schema); code != 0 {
		t.Fatalf("create: %s", errOut)
	}
	os.WriteFile(dir+"/a.csv", []byte("id\n1\n2\n"), 0o644)
	if code, _, errOut := run(t, nil, "append", u, dir+"/a.csv"); code != 0 {
		t.Fatalf("append: %s", errOut)
	}
	if code, _, errOut := run(t, nil, "tag", u, "two-rows"); code != 0 {
		t.Fatalf("tag: %s", errOut)
	}
	if code, _, errOut := run(t, nil, "delete", u, "--filter", "id >= 1"); code != 0 {
		t.Fatalf("delete: %s", errOut)
	}
	code, out, errOut := run(t, nil, "restore", u, "--tag", "two-rows")
	if code != 0 || out != "restored v2 as version 4 (2 rows)\n" {
		t.Fatalf("restore --tag: exit %d %q %s", code, out, errOut)
	}
	code, out, errOut = run(t, nil, "restore", u, "--version", "3")
	if code != 0 || out != "restored v3 as version 5 (0 rows)\n" {
		t.Fatalf("restore --version: exit %d %q %s", code, out, errOut)
	}
	if code, _, errOut := run(t, nil, "restore", u, "--version", "9"); code != 5 || !strings.Contains(errOut, "version 9") {
		t.Fatalf("restore of a version that does not exist: exit %d %s", code, errOut)
	}
	if code, _, _ := run(t, nil, "restore", u); code != 2 {
		t.Fatalf("restore without --version or --tag: exit %d", code)
	}
}

// upsert replaces rows by key from files, refuses a key twice in its input
// with nothing committed, and needs --key.
func TestUpsertByKeyFromFiles(t *testing.T) {
	dir := t.TempDir()
	schema := dir + "/events.json"
	if err := os.WriteFile(schema, []byte(`{"fields":[{"name":"id","type":"int64"},{"name":"reward","type":"float64","nullable":true}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	u := "file://" + dir + "/events"
	if code, _, errOut := run(t, nil, "create", u, "--schema", schema); code != 0 {
		t.Fatalf("create: %s", errOut)
	}
	os.WriteFile(dir+"/a.csv", []byte("id,reward\n1,0.5\n2,0.25\n"), 0o644)
	if code, _, errOut := run(t, nil, "append", u, dir+"/a.csv"); code != 0 {
		t.Fatalf("append: %s", errOut)
	}
	os.WriteFile(dir+"/fix.jsonl", []byte(`{"id":2,"reward":1.0}`+"\n"+`{"id":3,"reward":0.75}`+"\n"), 0o644)
	code, out, errOut := run(t, nil, "upsert", u, dir+"/fix.jsonl", "--key", "id")
	if code != 0 || out != "upserted 2 rows, replacing 1 (version 3)\n" {
		t.Fatalf("upsert: exit %d %q %s", code, out, errOut)
	}
	code, out, errOut = run(t, nil, "scan", u, "--format", "csv")
	if code != 0 || !strings.Contains(out, "1,0.5") || !strings.Contains(out, "2,1") || !strings.Contains(out, "3,0.75") || strings.Contains(out, "2,0.25") {
		t.Fatalf("scan after the upsert: exit %d\n%s%s", code, out, errOut)
	}
	os.WriteFile(dir+"/twice.csv", []byte("id,reward\n4,1\n4,2\n"), 0o644)
	os.WriteFile(dir+"/fine.jsonl", []byte("{\"id\": 5}\n"), 0o644)
	if code, _, errOut := run(t, nil, "upsert", u, dir+"/fine.jsonl", dir+"/twice.csv", "--key", "id"); code != 4 || !strings.Contains(errOut, "twice.csv: table: CSV line 3: column \"id\": the key appears twice") {
		t.Fatalf("a key twice, in the second file: exit %d %s", code, errOut)
	}
	if code, _, errOut := run(t, nil, "upsert", u, dir+"/twice.csv", "--key", "id"); code != 4 || !strings.Contains(errOut, "twice") || !strings.Contains(errOut, "nothing was upserted") {
		t.Fatalf("an upsert with a key twice: exit %d %s", code, errOut)
	}
	if code, _, errOut := run(t, nil, "upsert", u, dir+"/fix.jsonl"); code != 2 || !strings.Contains(errOut, "--key") {
		t.Fatalf("an upsert without --key: exit %d %s", code, errOut)
	}
	if code, out, _ := run(t, nil, "versions", u); code != 0 || strings.Count(out, "\n") != 4 || strings.Contains(out, "OPERATION") {
		t.Fatalf("versions after refused upserts: %q", out)
	}
	code, out, errOut = run(t, nil, "update", u, "--filter", "id >= 2", "--set", "reward = 0.5")
	if code != 0 || out != "updated 2 rows (version 4)\n" {
		t.Fatalf("update: exit %d %q %s", code, out, errOut)
	}
	code, out, _ = run(t, nil, "scan", u, "--format", "csv", "--filter", "reward = 0.5")
	if code != 0 || strings.Count(out, "\n") != 4 { // the header, 1 (0.5 before), 2 and 3
		t.Fatalf("scan after the update: %q", out)
	}
	if code, _, errOut := run(t, nil, "update", u, "--filter", "id = 1", "--set", "id = null"); code != 2 || !strings.Contains(errOut, "not nullable") {
		t.Fatalf("an update to null of a non-nullable column: exit %d %s", code, errOut)
	}
	if code, out, _ := run(t, nil, "update", u, "--filter", "id = 99", "--set", "reward = 1"); code != 0 || !strings.Contains(out, "no row matched") {
		t.Fatalf("an update matching nothing: %q", out)
	}
	code, out, errOut = run(t, nil, "update", u, "--filter", "id >= 2", "--set", "reward = reward * 4 + id")
	if code != 0 || out != "updated 2 rows (version 5)\n" {
		t.Fatalf("update by an expression: exit %d %q %s", code, out, errOut)
	}
	if code, out, _ := run(t, nil, "scan", u, "--format", "csv", "--filter", "reward >= 4"); code != 0 || out != "id,reward\n2,4\n3,5\n" {
		t.Fatalf("scan after the update by an expression: %q", out)
	}
	if code, _, errOut := run(t, nil, "update", u, "--filter", "id = 1", "--set", "id = reward * 2"); code != 2 || !strings.Contains(errOut, "integer arithmetic only") {
		t.Fatalf("an update of an integer column to a float: exit %d %s", code, errOut)
	}

	// An overwrite replaces every row; under a key, run again, it
	// overwrites nothing; rows that do not fit change nothing.
	os.WriteFile(dir+"/snap.csv", []byte("id,reward\n7,0.7\n8,0.8\n"), 0o644)
	code, out, errOut = run(t, nil, "overwrite", u, dir+"/snap.csv", "--idempotency-key", "daily-1")
	if code != 0 || out != "overwrote the table with 2 rows (version 6)\n" {
		t.Fatalf("overwrite: exit %d %q %s", code, out, errOut)
	}
	os.WriteFile(dir+"/later.csv", []byte("id,reward\n1,0.5\n2,0.25\n"), 0o644)
	if code, out, _ := run(t, nil, "append", u, dir+"/later.csv", "--no-idempotency-key"); code != 0 { // v7
		t.Fatalf("append after the overwrite: %q", out)
	}
	code, out, errOut = run(t, nil, "overwrite", u, dir+"/snap.csv", "--idempotency-key", "daily-1")
	if code != 0 || !strings.Contains(out, "already overwritten under this key by version 6") {
		t.Fatalf("the overwrite run again: exit %d %q %s", code, out, errOut)
	}
	os.WriteFile(dir+"/bad.csv", []byte("id,nope\n1,2\n"), 0o644)
	if code, _, errOut := run(t, nil, "overwrite", u, dir+"/twice.csv", dir+"/bad.csv"); code != 4 || !strings.Contains(errOut, "nope") || !strings.Contains(errOut, "nothing was overwritten") {
		t.Fatalf("an overwrite with a column the table lacks: exit %d %s", code, errOut)
	}
	if code, out, _ := run(t, nil, "scan", u, "--format", "csv"); code != 0 || out != "id,reward\n7,0.7\n8,0.8\n1,0.5\n2,0.25\n" {
		t.Fatalf("scan after the overwrites: %q", out)
	}
	if code, out, errOut := run(t, nil, "overwrite", u); code != 0 || out != "overwrote the table with 0 rows (version 8)\n" {
		t.Fatalf("an overwrite with no file: exit %d %q %s", code, out, errOut)
	}
}

// A create where a table is already names the URL and the table's version,
// and says what to do instead.
func TestCreateOverATableNamesIt(t *testing.T) {
	dir := t.TempDir()
	schema := dir + "/s.json"
	if err := os.WriteFile(schema, []byte(`{"fields":[{"name":"id","type":"int64"}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	u := "file://" + dir + "/t"
	if code, _, errOut := run(t, nil, "create", u, "--schema", schema); code != 0 {
		t.Fatal(errOut)
	}
	code, _, errOut := run(t, nil, "create", u, "--schema", schema)
	if code != 6 || !strings.Contains(errOut, u+": a table exists there already (at version 1)") || !strings.Contains(errOut, "strata append") {
		t.Fatalf("create over a table: exit %d, %q", code, errOut)
	}
}

// JSON lines with NaN and ±Infinity, as Python writes them, append and
// scan back as they were written: floats as floats, keys in the schema's
// order; a filter over the column still finds an infinite value.
func TestJSONLinesRoundTripNaNAndFloatsInSchemaOrder(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(dir+"/s.json", []byte(`{"fields":[{"name":"zid","type":"int64"},{"name":"reward","type":"float64","nullable":true},{"name":"agent","type":"string","nullable":true}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	rows := `{"zid":1,"reward":NaN,"agent":"a"}
{"zid":2,"reward":Infinity,"agent":"b"}
{"zid":3,"reward":-Infinity,"agent":null}
{"zid":4,"reward":0.0,"agent":"d"}
{"zid":5,"reward":2.5,"agent":"e"}
`
	if err := os.WriteFile(dir+"/r.jsonl", []byte(rows), 0o644); err != nil {
		t.Fatal(err)
	}
	u := "file://" + dir + "/t"
	if code, _, errOut := run(t, nil, "create", u, "--schema", dir+"/s.json"); code != 0 {
		t.Fatal(errOut)
	}
	if code, _, errOut := run(t, nil, "append", u, dir+"/r.jsonl"); code != 0 {
		t.Fatal(errOut)
	}
	if code, out, errOut := run(t, nil, "scan", u, "--format", "jsonl"); code != 0 || out != rows {
		t.Fatalf("scan: exit %d\n%s\nwant\n%s%s", code, out, rows, errOut)
	}
	if code, out, errOut := run(t, nil, "scan", u, "--format", "jsonl", "--filter", "reward > 1e300"); code != 0 || out != "{\"zid\":2,\"reward\":Infinity,\"agent\":\"b\"}\n" {
		t.Fatalf("scan of reward > 1e300: exit %d %q %s", code, out, errOut)
	}
}

// A scan that finds nothing prints its header (table and CSV); a table's
// widths come from its first rows, and later rows are padded to them
// rather than held until the end.
func TestScanPrintsHeadersForNothingAndStreamsATable(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(dir+"/s.json", []byte(`{"fields":[{"name":"id","type":"int64"},{"name":"name","type":"string"}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	var rows strings.Builder
	for i := range 500 {
		name := "n"
		if i == 400 {
			name = "a-long-name-after-the-sample"
		}
		fmt.Fprintf(&rows, "{\"id\":%d,\"name\":%q}\n", i, name)
	}
	if err := os.WriteFile(dir+"/r.jsonl", []byte(rows.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	u := "file://" + dir + "/t"
	if code, _, errOut := run(t, nil, "create", u, "--schema", dir+"/s.json"); code != 0 {
		t.Fatal(errOut)
	}
	for format, want := range map[string]string{"table": "id  name\n", "csv": "id,name\n"} {
		if code, out, errOut := run(t, nil, "scan", u, "--format", format, "--filter", "id < 0"); code != 0 || out != want {
			t.Fatalf("scan of nothing as %s: exit %d %q %s", format, code, out, errOut)
		}
	}
	if code, out, errOut := run(t, nil, "scan", u, "--columns", "name", "--filter", "id < 0"); code != 0 || out != "name\n" {
		t.Fatalf("scan of nothing, one column: exit %d %q %s", code, out, errOut)
	}
	if code, _, errOut := run(t, nil, "append", u, dir+"/r.jsonl"); code != 0 {
		t.Fatal(errOut)
	}
	code, out, errOut := run(t, nil, "scan", u, "--columns", "name,id")
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if code != 0 || len(lines) != 501 || lines[0] != "name  id" || lines[1] != "n     0" {
		t.Fatalf("scan as a table: exit %d, %d lines, %q %q %s", code, len(lines), lines[0], lines[min(1, len(lines)-1)], errOut)
	}
	if lines[401] != "a-long-name-after-the-sample  400" || lines[402] != "n     401" {
		t.Fatalf("rows after the sample keep its widths: %q %q", lines[401], lines[402])
	}
}

// The demo's hints name the program that ran: go run's, an installed
// binary by its name, one run by its path with strata-compactor beside it.
func TestTheDemosHintsNameTheBinaryThatRan(t *testing.T) {
	for arg0, want := range map[string][2]string{
		"/tmp/go-build123/b001/exe/strata": {"go run ./cmd/strata", "go run ./cmd/strata-compactor"},
		"strata":                           {"strata", "strata-compactor"},
		"/usr/local/bin/strata":            {"/usr/local/bin/strata", "/usr/local/bin/strata-compactor"},
		"./bin/strata":                     {"./bin/strata", "./bin/strata-compactor"},
	} {
		if s, c := invokedAs(arg0); s != want[0] || c != want[1] {
			t.Errorf("run as %s: hints %q and %q, want %q", arg0, s, c, want)
		}
	}
}

// STRATA_SERVER, set for the verbs that ask a server, leaves scan and
// append of a bucket's table (named by URL) as they are.
func TestAServerInTheEnvironmentLeavesURLsAlone(t *testing.T) {
	dir := t.TempDir()
	schema := dir + "/schema.json"
	rows := dir + "/rows.jsonl"
	if err := os.WriteFile(schema, []byte(`{"fields":[{"name":"id","type":"int64"}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(rows, []byte("{\"id\":1}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	u := "file://" + dir + "/t"
	if code, _, errOut := run(t, nil, "create", u, "--schema", schema); code != 0 {
		t.Fatalf("create: %d %s", code, errOut)
	}
	t.Setenv("STRATA_SERVER", "http://127.0.0.1:1")
	if code, out, errOut := run(t, nil, "append", u, rows); code != 0 || !strings.Contains(out, "appended 1 rows") {
		t.Fatalf("append by URL with STRATA_SERVER set: %d %s %s", code, out, errOut)
	}
	if code, out, errOut := run(t, nil, "scan", u, "--format", "jsonl"); code != 0 || !strings.Contains(out, `"id":1`) {
		t.Fatalf("scan by URL with STRATA_SERVER set: %d %s %s", code, out, errOut)
	}
}
