package lakehouse_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog/rest"
	itable "github.com/apache/iceberg-go/table"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/engine"
	icebergexport "github.com/stratadb/strata/engine/iceberg"
	"github.com/stratadb/strata/harness/rollouts"
	"github.com/stratadb/strata/harness/testenv"
	"github.com/stratadb/strata/lakehouse"
	"github.com/stratadb/strata/server"
	"github.com/stratadb/strata/table"
	"github.com/stratadb/strata/table/evolve"
	"github.com/stratadb/strata/table/expr"
	"github.com/stratadb/strata/table/format"
	"github.com/stratadb/strata/table/value"
)

// catalogFixture is a server over a bucket root, with the Iceberg
// catalog under /iceberg, and iceberg-go's REST client of it.
type catalogFixture struct {
	root  string
	st    store
	hs    *httptest.Server
	cat   *rest.Catalog
	srv   *server.Server
	drop  *dropOnce // drops the answer to one commit when armed
	token string
}

// dropOnce runs a request through the server, then, when armed, closes
// the connection instead of answering: the request's effect stands and
// the client never learns it. It keeps the dropped request's body.
type dropOnce struct {
	next  http.Handler
	mu    sync.Mutex
	armed bool
	body  []byte
	path  string
}

func (d *dropOnce) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	d.mu.Lock()
	drop := d.armed && r.Method == http.MethodPost
	if drop {
		d.armed = false
	}
	d.mu.Unlock()
	if !drop {
		d.next.ServeHTTP(w, r)
		return
	}
	body, _ := io.ReadAll(r.Body)
	d.mu.Lock()
	d.body, d.path = body, r.URL.EscapedPath()
	d.mu.Unlock()
	r.Body = io.NopCloser(bytes.NewReader(body))
	d.next.ServeHTTP(httptest.NewRecorder(), r)
	conn, _, err := http.NewResponseController(w).Hijack()
	if err == nil {
		conn.Close()
	}
}

func startCatalog(t *testing.T, st store) *catalogFixture {
	t.Helper()
	f := &catalogFixture{root: st.url, st: st, token: "catalog-secret"}
	srv, err := server.New(&server.Options{Bucket: st.url, Instance: "cat", Token: f.token, IcebergExport: icebergexport.ForCatalog,
		Log: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	if err != nil {
		t.Fatal(err)
	}
	f.srv = srv
	f.drop = &dropOnce{next: srv.Handler()}
	f.hs = httptest.NewServer(f.drop)
	t.Cleanup(func() { f.hs.Close(); _ = srv.Shutdown(ctx) })
	props := iceberg.Properties{}
	maps.Copy(props, st.props)
	f.cat, err = rest.NewCatalog(ctx, "strata", f.hs.URL+"/iceberg", rest.WithOAuthToken(f.token), rest.WithAdditionalProps(props))
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// db opens the table at name under the root, for Strata's own commits.
func (f *catalogFixture) db(t *testing.T, name string) (*engine.DB, blob.Bucket) {
	t.Helper()
	b, err := blob.Open(ctx, blob.JoinURL(f.root, name))
	if err != nil {
		t.Fatal(err)
	}
	db, err := engine.OpenNew(b, &engine.Options{Name: name, Writer: "test", CloseBucket: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db, b
}

// load loads a table through the catalog and checks that its current
// snapshot is Strata's newest version and reads as Strata reads it.
func (f *catalogFixture) load(t *testing.T, b blob.Bucket, ident itable.Identifier) *itable.Table {
	t.Helper()
	tbl, err := f.cat.LoadTable(ctx, ident)
	if err != nil {
		t.Fatalf("load %v: %v", ident, err)
	}
	latest, err := table.LatestVersion(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	if cur := tbl.CurrentSnapshot(); cur == nil || uint64(cur.SnapshotID) != latest {
		t.Fatalf("load %v: current snapshot %+v, want version %d", ident, cur, latest)
	}
	want, got := strataRows(t, b, latest), catalogRows(t, tbl, 0)
	if !slices.Equal(want, got) {
		t.Fatalf("version %d: Strata reads %d rows, iceberg-go through the catalog %d; first difference: Strata %.200q, iceberg-go %.200q",
			latest, len(want), len(got), firstDiff(want, got), firstDiff(got, want))
	}
	return tbl
}

// catalogRows scans a table iceberg-go loaded (snapshot 0: the current).
func catalogRows(t *testing.T, tbl *itable.Table, snapshot int64) []string {
	t.Helper()
	var opts []itable.ScanOption
	if snapshot != 0 {
		opts = append(opts, itable.WithSnapshotID(snapshot))
	}
	_, it, err := tbl.Scan(opts...).ToArrowRecords(ctx)
	if err != nil {
		t.Fatalf("iceberg scan: %v", err)
	}
	var recs []arrow.RecordBatch
	for rec, err := range it {
		if err != nil {
			t.Fatalf("iceberg scan: %v", err)
		}
		recs = append(recs, rec)
	}
	defer func() {
		for _, r := range recs {
			r.Release()
		}
	}()
	return rowsOf(t, recs)
}

func idents(t *testing.T, seq func(func(itable.Identifier, error) bool)) []string {
	t.Helper()
	var out []string
	for id, err := range seq {
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, strings.Join(id, "."))
	}
	return out
}

// iceberg-go's REST catalog client, pointed at strata serve's /iceberg,
// lists the namespaces and tables of the bucket's folders, and loads and
// scans a table after Strata's appends, a delete, an upsert and an alter
// with no export run — each time the newest version, read exactly as
// Strata reads it; a tag is a ref. Then iceberg-go appends rows through
// the catalog, and a commit whose answer was lost, sent again, stores its
// rows once.
func TestIcebergEnginesSeeEveryTableLiveThroughTheCatalog(t *testing.T) {
	for name, mk := range stores(t) {
		t.Run(name, func(t *testing.T) {
			st := mk(t)
			f := startCatalog(t, st)
			alloc := testenv.Allocator(t)
			rec := rollouts.Batch(alloc, 42, 0, 0, 50)
			_, b := f.db(t, "runs/eval/t")
			if _, _, err := engine.Create(ctx, b, rollouts.Schema, "test", nil, rec); err != nil {
				t.Fatal(err)
			}
			rec.Release()
			_, solo := f.db(t, "solo")
			if _, _, err := engine.Create(ctx, solo, rollouts.Schema, "test", nil); err != nil {
				t.Fatal(err)
			}
			db, _ := f.db(t, "runs/eval/t")

			nss, err := f.cat.ListNamespaces(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			if got := fmtIdents(nss); !slices.Equal(got, []string{"default", "runs"}) {
				t.Fatalf("top-level namespaces %v, want [default runs]", got)
			}
			if nss, err = f.cat.ListNamespaces(ctx, itable.Identifier{"runs"}); err != nil || !slices.Equal(fmtIdents(nss), []string{"runs.eval"}) {
				t.Fatalf("namespaces under runs: %v, %v", fmtIdents(nss), err)
			}
			if got := idents(t, f.cat.ListTables(ctx, itable.Identifier{"runs", "eval"})); !slices.Equal(got, []string{"runs.eval.t"}) {
				t.Fatalf("tables of runs.eval: %v", got)
			}
			if got := idents(t, f.cat.ListTables(ctx, itable.Identifier{"default"})); !slices.Equal(got, []string{"default.solo"}) {
				t.Fatalf("tables of default: %v", got)
			}
			ident := itable.Identifier{"runs", "eval", "t"}
			f.load(t, b, ident)

			more := rollouts.Batch(alloc, 42, 1, 0, 30)
			if _, err := db.Append(ctx, engine.AppendOptions{}, more); err != nil {
				t.Fatal(err)
			}
			more.Release()
			f.load(t, b, ident)
			if _, _, err := db.Delete(ctx, expr.Lt("step", value.Int(10))); err != nil {
				t.Fatal(err)
			}
			f.load(t, b, ident)
			up := rollouts.Batch(alloc, 43, 1, 20, 5) // rows of worker 1 at steps 20..24, new values
			if _, err := db.Upsert(ctx, []string{"id"}, func(*arrow.Schema) ([]arrow.RecordBatch, *format.Idempotency, error) {
				return []arrow.RecordBatch{up}, nil, nil
			}); err != nil {
				t.Fatal(err)
			}
			up.Release()
			f.load(t, b, ident)
			if _, err := db.Alter(ctx, evolve.ColumnChange{Op: evolve.AddColumn, Column: "note", Type: arrow.BinaryTypes.String}); err != nil {
				t.Fatal(err)
			}
			tbl := f.load(t, b, ident)
			if tbl.Schema().Field(len(tbl.Schema().Fields())-1).Name != "note" {
				t.Fatalf("the loaded schema after the alter: %v", tbl.Schema())
			}
			latest, _ := table.LatestVersion(ctx, b)
			if err := table.CreateTag(ctx, b, "checked", latest); err != nil {
				t.Fatal(err)
			}
			tbl = f.load(t, b, ident)
			if r, ok := maps.Collect(tbl.Metadata().Refs())["checked"]; !ok || uint64(r.SnapshotID) != latest || r.SnapshotRefType != itable.TagRef {
				t.Fatalf("tag checked: ref %+v, %v; want a tag of snapshot %d", r, ok, latest)
			}

			// iceberg-go appends through the catalog.
			before := len(strataRows(t, b, latest))
			tbl = appendThroughCatalog(t, tbl, 1000, 20)
			latest, _ = table.LatestVersion(ctx, b)
			if n := len(strataRows(t, b, latest)); n != before+20 {
				t.Fatalf("after iceberg-go's append of 20 rows: %d rows, want %d", n, before+20)
			}
			f.load(t, b, ident)

			// The answer to the next commit is lost; the engine sends it
			// again, and its rows are stored once.
			f.drop.mu.Lock()
			f.drop.armed = true
			f.drop.mu.Unlock()
			tx := tbl.NewTransaction()
			rr := rowsReader(t, tbl, 2000, 7)
			if err := tx.Append(ctx, rr, nil); err != nil {
				t.Fatal(err)
			}
			rr.Release()
			if _, err := tx.Commit(ctx); err == nil {
				t.Fatal("the commit whose answer was dropped succeeded")
			} else {
				t.Logf("the commit whose answer was dropped: %v", err)
			}
			if f.drop.path == "" {
				t.Fatal("no commit reached the server")
			}
			for range 2 {
				req, err := http.NewRequest(http.MethodPost, f.hs.URL+f.drop.path, bytes.NewReader(f.drop.body))
				if err != nil {
					t.Fatal(err)
				}
				req.Header.Set("Authorization", "Bearer "+f.token)
				req.Header.Set("Content-Type", "application/json")
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				msg, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					t.Fatalf("the commit sent again: %d %s", resp.StatusCode, msg)
				}
			}
			latest, _ = table.LatestVersion(ctx, b)
			if n := len(strataRows(t, b, latest)); n != before+27 {
				t.Fatalf("after a commit of 7 rows sent three times: %d rows, want %d", n, before+27)
			}
			tbl = f.load(t, b, ident)

			// A file of the table's own is not appended (its rows would
			// come back after a delete), nor is one of another table.
			m, err := table.ReadLatest(ctx, b)
			if err != nil {
				t.Fatal(err)
			}
			tx = tbl.NewTransaction()
			if err := tx.AddFiles(ctx, []string{tbl.Location() + "/" + m.Fragments[0].Key}, nil, true); err != nil {
				t.Fatal(err)
			}
			if _, err := tx.Commit(ctx); err == nil || !strings.Contains(err.Error(), "is not under") {
				t.Fatalf("an append of the table's own fragment: %v", err)
			}
			if after, _ := table.LatestVersion(ctx, b); after != latest {
				t.Fatalf("a refused append moved the table from version %d to %d", latest, after)
			}
		})
	}
}

func fmtIdents(ids []itable.Identifier) []string {
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = strings.Join(id, ".")
	}
	slices.Sort(out)
	return out
}

// rowsReader makes n rows of the table's current schema, ids from first.
func rowsReader(t *testing.T, tbl *itable.Table, first int64, n int) array.RecordReader {
	t.Helper()
	sc, err := itable.SchemaToArrowSchema(tbl.Schema(), nil, false, false)
	if err != nil {
		t.Fatal(err)
	}
	rec := rollouts.BatchAs(testenv.Allocator(t), sc, 44, 9, first, n)
	defer rec.Release()
	rr, err := array.NewRecordReader(sc, []arrow.RecordBatch{rec})
	if err != nil {
		t.Fatal(err)
	}
	return rr
}

// appendThroughCatalog appends n rows with iceberg-go's transaction.
func appendThroughCatalog(t *testing.T, tbl *itable.Table, first int64, n int) *itable.Table {
	t.Helper()
	tx := tbl.NewTransaction()
	rr := rowsReader(t, tbl, first, n)
	defer rr.Release()
	if err := tx.Append(ctx, rr, nil); err != nil {
		t.Fatalf("iceberg-go append: %v", err)
	}
	out, err := tx.Commit(ctx)
	if err != nil {
		t.Fatalf("iceberg-go commit: %v", err)
	}
	return out
}

// The catalog answers in the Iceberg error model: a commit of any change
// but an appended snapshot is refused naming what Strata takes, and
// nothing changes; a load names an ETag and answers 304 to it until the
// table moves; the bearer token is required; a table or namespace that
// does not exist is the spec's NoSuch… exception.
func TestTheCatalogRefusesInTheIcebergErrorModel(t *testing.T) {
	st := store{url: "file://" + t.TempDir()}
	f := startCatalog(t, st)
	db, b := f.db(t, "t")
	rec := rollouts.Batch(testenv.Allocator(t), 42, 0, 0, 10)
	if _, _, err := engine.Create(ctx, b, rollouts.Schema, "test", nil, rec); err != nil {
		t.Fatal(err)
	}
	rec.Release()
	do := func(method, path, token, body string, header ...string) (int, http.Header, map[string]any) {
		t.Helper()
		req, err := http.NewRequest(method, f.hs.URL+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&out)
		return resp.StatusCode, resp.Header, out
	}
	// wantError checks the error model: {"error": {"message", "type", "code"}}.
	wantError := func(what string, status int, out map[string]any, got int, typ, words string) {
		t.Helper()
		e, _ := out["error"].(map[string]any)
		if got != status || e == nil || e["type"] != typ || e["code"] != float64(status) || !strings.Contains(fmt.Sprint(e["message"]), words) {
			t.Fatalf("%s: %d %v; want %d, type %s, a message with %q", what, got, out, status, typ, words)
		}
	}
	const tbl = "/iceberg/v1/namespaces/default/tables/t"
	code, _, out := do("GET", tbl, "", "")
	wantError("no token", 401, out, code, "NotAuthorizedException", "bearer token")
	code, _, out = do("GET", tbl, "wrong", "")
	wantError("a wrong token", 401, out, code, "NotAuthorizedException", "not this server's")
	code, _, out = do("GET", "/iceberg/v1/namespaces/default/tables/nope", f.token, "")
	wantError("no table", 404, out, code, "NoSuchTableException", "no table default.nope")
	code, _, out = do("GET", "/iceberg/v1/namespaces/nowhere/tables", f.token, "")
	wantError("no namespace", 404, out, code, "NoSuchNamespaceException", "no namespace nowhere")
	// One name a table: a / in a level or a table's name is no alias.
	code, _, out = do("GET", "/iceberg/v1/namespaces/default%2Fx/tables", f.token, "")
	wantError("a / in a namespace", 400, out, code, "BadRequestException", "with a /")
	code, _, out = do("GET", "/iceberg/v1/namespaces/default/tables/x%2Ft", f.token, "")
	wantError("a / in a table's name", 400, out, code, "BadRequestException", "has a /")

	code, h, out := do("GET", tbl, f.token, "")
	etag := h.Get("ETag")
	if code != 200 || etag == "" || out["metadata-location"] == nil {
		t.Fatalf("load: %d, ETag %q, %v", code, etag, out)
	}
	if code, _, _ := do("GET", tbl, f.token, "", "If-None-Match", etag); code != http.StatusNotModified {
		t.Fatalf("a load naming the current ETag: %d, want 304", code)
	}
	before, _ := table.LatestVersion(ctx, b)
	refused := map[string]string{
		"set-properties":    `{"updates":[{"action":"set-properties","updates":{"k":"v"}}]}`,
		"add-schema":        `{"updates":[{"action":"add-schema","schema":{"type":"struct","schema-id":1,"fields":[]}}]}`,
		"remove-snapshots":  `{"updates":[{"action":"remove-snapshots","snapshot-ids":[1]}]}`,
		"an overwrite":      `{"updates":[{"action":"add-snapshot","snapshot":{"snapshot-id":7,"manifest-list":"x","summary":{"operation":"overwrite"}}},{"action":"set-snapshot-ref","ref-name":"main","type":"branch","snapshot-id":7}]}`,
		"a branch":          `{"updates":[{"action":"add-snapshot","snapshot":{"snapshot-id":7,"manifest-list":"x","summary":{"operation":"append"}}},{"action":"set-snapshot-ref","ref-name":"dev","type":"branch","snapshot-id":7}]}`,
		"no snapshot":       `{"updates":[]}`,
		"a staged snapshot": `{"updates":[{"action":"add-snapshot","snapshot":{"snapshot-id":7,"manifest-list":"x","summary":{"operation":"append"}}}]}`,
	}
	for what, body := range refused {
		code, _, out := do("POST", tbl, f.token, body)
		wantError(what, 406, out, code, "UnsupportedOperationException", "Strata takes commits whose one change is a snapshot of operation append")
	}
	for _, route := range [][2]string{{"POST", "/iceberg/v1/namespaces"}, {"DELETE", tbl}, {"POST", "/iceberg/v1/tables/rename"}, {"POST", "/iceberg/v1/namespaces/default/tables"}} {
		code, _, out := do(route[0], route[1], f.token, `{}`)
		wantError(route[0]+" "+route[1], 406, out, code, "UnsupportedOperationException", "does not do this")
	}
	// A requirement that fails is the spec's 409, for the engine to load
	// the table again.
	code, _, out = do("POST", tbl, f.token, `{"requirements":[{"type":"assert-table-uuid","uuid":"00000000-0000-0000-0000-000000000000"}],"updates":[{"action":"add-snapshot","snapshot":{"snapshot-id":7,"manifest-list":"x","summary":{"operation":"append"}}},{"action":"set-snapshot-ref","ref-name":"main","type":"branch","snapshot-id":7}]}`)
	wantError("a wrong table uuid", 409, out, code, "CommitFailedException", "requirement failed")
	// A manifest list outside the table's location is refused.
	code, _, out = do("POST", tbl, f.token, `{"updates":[{"action":"add-snapshot","snapshot":{"snapshot-id":7,"manifest-list":"file:///etc/passwd","summary":{"operation":"append"}}},{"action":"set-snapshot-ref","ref-name":"main","type":"branch","snapshot-id":7}]}`)
	wantError("a manifest list elsewhere", 400, out, code, "BadRequestException", "not under the table's location")
	// A snapshot whose summary adds files its manifests do not; a
	// manifest list too large to read.
	loc := st.url + "/t"
	var empty bytes.Buffer
	seq := int64(7)
	if err := iceberg.WriteManifestList(2, &empty, 7, nil, &seq, 0, nil); err != nil {
		t.Fatal(err)
	}
	if err := b.PutIfAbsent(ctx, "_iceberg/engines/metadata/empty.avro", empty.Bytes()); err != nil {
		t.Fatal(err)
	}
	appendOf := func(list, summary string) string {
		return `{"updates":[{"action":"add-snapshot","snapshot":{"snapshot-id":7,"manifest-list":"` + list + `","summary":{"operation":"append"` + summary + `}}},{"action":"set-snapshot-ref","ref-name":"main","type":"branch","snapshot-id":7}]}`
	}
	code, _, out = do("POST", tbl, f.token, appendOf(loc+"/_iceberg/engines/metadata/empty.avro", `,"added-data-files":"2"`))
	wantError("a summary of files no manifest adds", 400, out, code, "BadRequestException", "summary says added-data-files 2; its manifests add 0")
	big := filepath.Join(strings.TrimPrefix(loc, "file://"), "_iceberg", "engines", "metadata", "big.avro")
	if err := os.WriteFile(big, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(big, 65<<20); err != nil { // sparse: no disk used
		t.Fatal(err)
	}
	code, _, out = do("POST", tbl, f.token, appendOf(loc+"/_iceberg/engines/metadata/big.avro", ""))
	wantError("a manifest list of 65 MiB", 400, out, code, "BadRequestException", "a manifest list or manifest of at most")
	if after, _ := table.LatestVersion(ctx, b); after != before {
		t.Fatalf("refused commits moved the table from version %d to %d", before, after)
	}
	// Once the table moves, the old ETag no longer matches.
	more := rollouts.Batch(testenv.Allocator(t), 42, 1, 0, 5)
	if _, err := db.Append(ctx, engine.AppendOptions{}, more); err != nil {
		t.Fatal(err)
	}
	more.Release()
	if code, h, _ := do("GET", tbl, f.token, "", "If-None-Match", etag); code != 200 || h.Get("ETag") == etag {
		t.Fatalf("a load after an append, naming the old ETag: %d, ETag %q", code, h.Get("ETag"))
	}
}

// A table dropped and made again elsewhere, up to the same version, is
// loaded as the new table, not answered from what the server read of the
// one before.
func TestATableMadeAgainIsLoadedAnew(t *testing.T) {
	st := store{url: "file://" + t.TempDir()}
	f := startCatalog(t, st)
	create := func(schema *arrow.Schema) {
		t.Helper()
		_, b := f.db(t, "t")
		if _, _, err := engine.Create(ctx, b, schema, "test", nil); err != nil {
			t.Fatal(err)
		}
	}
	create(rollouts.Schema)
	ident := itable.Identifier{"default", "t"}
	first, err := f.cat.LoadTable(ctx, ident)
	if err != nil {
		t.Fatal(err)
	}
	db, _ := f.db(t, "t")
	if err := db.Drop(ctx, engine.DropOptions{Wait: -1}); err != nil {
		t.Fatal(err)
	}
	other := arrow.NewSchema([]arrow.Field{{Name: "k", Type: arrow.PrimitiveTypes.Int64}}, nil)
	create(other)
	again, err := f.cat.LoadTable(ctx, ident)
	if err != nil {
		t.Fatal(err)
	}
	if again.Metadata().TableUUID() == first.Metadata().TableUUID() || again.Schema().NumFields() != 1 || again.Schema().Field(0).Name != "k" {
		t.Fatalf("the table made again loads as %v (uuid %s), the one before was %s", again.Schema(), again.Metadata().TableUUID(), first.Metadata().TableUUID())
	}
}

// A view written before the view named where engines write gets the
// names from the next export, even when no version is new: engines that
// append through the catalog would otherwise write into the table's own
// folders.
func TestAViewWithoutEnginePathsGetsThem(t *testing.T) {
	dir := t.TempDir()
	b, err := blob.Open(ctx, "file://"+dir)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if _, _, err := engine.Create(ctx, b, rollouts.Schema, "test", nil); err != nil {
		t.Fatal(err)
	}
	loc := "file://" + dir
	if _, err := lakehouse.Export(ctx, b, &lakehouse.Options{Location: loc}, time.Now()); err != nil {
		t.Fatal(err)
	}
	// The metadata as an older build wrote it: the same, without the two
	// properties, as the newest.
	raw, err := b.Get(ctx, "_iceberg/metadata/v1.metadata.json")
	if err != nil {
		t.Fatal(err)
	}
	var meta map[string]any
	if err := json.Unmarshal(raw, &meta); err != nil {
		t.Fatal(err)
	}
	props := meta["properties"].(map[string]any)
	delete(props, itable.WriteDataPathKey)
	delete(props, itable.WriteMetadataPathKey)
	old, _ := json.Marshal(meta)
	if err := b.PutIfAbsent(ctx, "_iceberg/metadata/v2.metadata.json", old); err != nil {
		t.Fatal(err)
	}
	res, err := lakehouse.Export(ctx, b, &lakehouse.Options{Location: loc}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	got := readMeta(t, store{}, res.MetadataLocation).Properties()
	if !res.Written || got[itable.WriteDataPathKey] != loc+"/_iceberg/engines/data" || got[itable.WriteMetadataPathKey] != loc+"/_iceberg/engines/metadata" {
		t.Fatalf("the export after an older view: written %v, properties %v", res.Written, got)
	}
}

// What another process does to a table's view shows in the next load: a
// view deleted (as the catalog's errors advise, to start it afresh) is
// written again rather than answered from memory; and the view a drop
// left behind, of the table before, is not taken for the new table's.
func TestTheCatalogFollowsTheViewOthersChange(t *testing.T) {
	st := store{url: "file://" + t.TempDir()}
	f := startCatalog(t, st)
	_, b := f.db(t, "t")
	rec := rollouts.Batch(testenv.Allocator(t), 42, 0, 0, 5)
	_, _, err := engine.Create(ctx, b, rollouts.Schema, "test", nil, rec)
	rec.Release()
	if err != nil {
		t.Fatal(err)
	}
	ident := itable.Identifier{"default", "t"}
	first := f.load(t, b, ident)
	dir := strings.TrimPrefix(st.url, "file://") + "/t"
	if err := os.RemoveAll(dir + "/_iceberg"); err != nil {
		t.Fatal(err)
	}
	again := f.load(t, b, ident)
	if _, err := os.Stat(strings.TrimPrefix(again.MetadataLocation(), "file://")); err != nil {
		t.Fatalf("after _iceberg/ was deleted, the load names %s: %v", again.MetadataLocation(), err)
	}
	// The table's own objects gone, the view left: a table made again
	// there gets a view of its own, numbered on.
	for _, sub := range []string{"_versions", "data"} {
		if err := os.RemoveAll(dir + "/" + sub); err != nil {
			t.Fatal(err)
		}
	}
	other := arrow.NewSchema([]arrow.Field{{Name: "k", Type: arrow.PrimitiveTypes.Int64}}, nil)
	if _, _, err := engine.Create(ctx, b, other, "test", nil); err != nil {
		t.Fatal(err)
	}
	res, err := lakehouse.Export(ctx, b, &lakehouse.Options{Location: st.url + "/t"}, time.Now())
	if err != nil {
		t.Fatalf("an export over the view of the table before: %v", err)
	}
	meta := readMeta(t, st, res.MetadataLocation)
	if meta.TableUUID() == first.Metadata().TableUUID() || len(meta.Snapshots()) != 1 || meta.CurrentSchema().Field(0).Name != "k" {
		t.Fatalf("the new table's view: uuid %s (the old %s), %d snapshots, schema %v", meta.TableUUID(), first.Metadata().TableUUID(), len(meta.Snapshots()), meta.CurrentSchema())
	}
}
