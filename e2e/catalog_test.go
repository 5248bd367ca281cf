package e2e

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog/rest"
	iceio "github.com/apache/iceberg-go/io"
	_ "github.com/apache/iceberg-go/io/gocloud/s3" // s3:// for iceberg-go's reads and writes
	itable "github.com/apache/iceberg-go/table"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/engine"
	"github.com/stratadb/strata/harness/rollouts"
	"github.com/stratadb/strata/harness/testenv"
	"github.com/stratadb/strata/table"
)

// answerDropper forwards requests to a server and, when armed, drops the
// answer to the next POST: the server acts on it, the client sees the
// connection close. It keeps the request it dropped the answer to.
type answerDropper struct {
	target string
	mu     sync.Mutex
	armed  bool
	body   []byte
	path   string
	header http.Header
}

func (d *answerDropper) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	req, err := http.NewRequestWithContext(r.Context(), r.Method, d.target+r.URL.RequestURI(), bytes.NewReader(body))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	req.Header = r.Header.Clone()
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	answer, _ := io.ReadAll(resp.Body)
	d.mu.Lock()
	drop := d.armed && r.Method == http.MethodPost
	if drop {
		d.armed, d.body, d.path, d.header = false, body, r.URL.RequestURI(), r.Header.Clone()
	}
	d.mu.Unlock()
	if drop {
		if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
			conn.Close()
		}
		return
	}
	for k, v := range resp.Header {
		w.Header()[k] = v
	}
	w.WriteHeader(resp.StatusCode)
	_, _ = w.Write(answer)
}

// resend sends the dropped request again, as an engine does after a lost
// answer.
func (d *answerDropper) resend(t *testing.T) {
	t.Helper()
	d.mu.Lock()
	req, err := http.NewRequest(http.MethodPost, d.target+d.path, bytes.NewReader(d.body))
	if err == nil {
		req.Header = d.header.Clone()
	}
	d.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("the commit sent again: %d %s", resp.StatusCode, msg)
	}
}

// serveAddr waits for strata serve to say where it listens.
func serveAddr(t *testing.T, srv *proc) string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		for line := range strings.Lines(srv.stdout()) {
			if _, rest, ok := strings.Cut(line, "listening on "); ok {
				addr, _, _ := strings.Cut(rest, ",")
				return strings.TrimSpace(addr)
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("strata serve did not start:\n%s", srv.stderr())
	return ""
}

// icebergProps are iceberg-go's properties for MinIO.
func icebergProps(minio *testenv.Server) iceberg.Properties {
	return iceberg.Properties{iceio.S3EndpointURL: minio.Endpoint, iceio.S3Region: "us-east-1",
		iceio.S3AccessKeyID: testenv.MinIOUser, iceio.S3SecretAccessKey: testenv.MinIOPassword}
}

// engineRows are n rows of the loaded table's schema, of worker 9 (the
// fleet's workers are 0 to 3) from seq first.
func engineRows(t *testing.T, tbl *itable.Table, first int64, n int) (array.RecordReader, []int64) {
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
	return rr, slices.Clone(rec.Column(rec.Schema().FieldIndices("id")[0]).(*array.Int64).Int64Values())
}

// iceberg-go appends through strata serve's catalog while four workers
// append through their shards and the Job compacts: every row of both is
// in the table once, and a commit whose answer a proxy dropped, sent
// again, stores its rows once.
func TestEnginesAppendThroughTheCatalogBesideAFleet(t *testing.T) {
	minio := testenv.MinIO(t)
	root := minio.URL(t)
	u := strings.Replace(root, "?", "/rollouts?", 1)
	var workers []*proc
	for w := range 4 {
		workers = append(workers, run(t, "strata", workerArgs(u, w)...))
	}
	waitForTable(t, u)
	compactor := run(t, "strata-compactor", "--interval", "400ms", "--table", u, "--min-fragments", "4", "--no-gc")
	srv := run(t, "strata", "serve", "--bucket", root, "--listen", "127.0.0.1:0", "--instance", "cat", "--token", "e2e-token")
	drop := &answerDropper{target: serveAddr(t, srv)}
	proxy := httptest.NewServer(drop)
	defer proxy.Close()
	cat, err := rest.NewCatalog(ctx, "strata", proxy.URL+"/iceberg", rest.WithOAuthToken("e2e-token"), rest.WithAdditionalProps(icebergProps(minio)))
	if err != nil {
		t.Fatal(err)
	}
	ident := itable.Identifier{"default", "rollouts"}
	var engineIDs []int64
	for i := range 6 {
		tbl, err := cat.LoadTable(ctx, ident)
		if err != nil {
			t.Fatalf("load %d: %v", i, err)
		}
		rr, ids := engineRows(t, tbl, int64(i*10), 10)
		tx := tbl.NewTransaction()
		err = tx.Append(ctx, rr, nil)
		rr.Release()
		if err != nil {
			t.Fatal(err)
		}
		if i == 3 {
			drop.mu.Lock()
			drop.armed = true
			drop.mu.Unlock()
		}
		_, err = tx.Commit(ctx)
		if i == 3 {
			if err == nil {
				t.Fatal("the commit whose answer was dropped succeeded")
			}
			drop.resend(t)
		} else if err != nil {
			t.Fatalf("commit %d: %v", i, err)
		}
		engineIDs = append(engineIDs, ids...)
	}
	for _, p := range workers {
		p.signal(syscall.SIGTERM)
		p.wait(t, time.Minute)
		if code := p.cmd.ProcessState.ExitCode(); code != 0 {
			t.Fatalf("worker: exit %d\n%s", code, p.stderr())
		}
	}
	compactor.signal(syscall.SIGTERM)
	compactor.wait(t, time.Minute)
	srv.signal(syscall.SIGTERM)
	srv.wait(t, time.Minute)
	if code := srv.cmd.ProcessState.ExitCode(); code != 0 {
		t.Fatalf("server: exit %d\n%s", code, lastLines(srv.stderr(), 5))
	}
	if !regexp.MustCompile(`"msg":"compacted".*"version":[1-9]`).MatchString(compactor.stderr()) {
		t.Fatalf("the Job never compacted:\n%s", lastLines(compactor.stderr(), 10))
	}
	var all []int64
	for _, p := range workers {
		all = append(all, acked(p.stdout())...)
	}
	n := checkOnce(t, u, append(all, engineIDs...))
	t.Logf("4 workers acknowledged %d rows and iceberg-go appended %d through the catalog (one commit sent twice); the table holds %d rows, each once", len(all), len(engineIDs), n)
	if len(all) == 0 {
		t.Fatal("no rows were acknowledged")
	}
}

// strata scan --as-of TIME reads what iceberg-go reads of the snapshot
// whose timestamp TIME is, for each of ten versions, through the catalog.
func TestAsOfReadsTheSnapshotAnEngineReadsAtThatTime(t *testing.T) {
	minio := testenv.MinIO(t)
	root := minio.URL(t)
	u := strings.Replace(root, "?", "/t?", 1)
	b, err := blob.Open(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	rec := rollouts.Batch(testenv.Allocator(t), 42, 0, 0, 5)
	_, _, err = engine.Create(ctx, b, rollouts.Schema, "e2e", nil, rec)
	rec.Release()
	if err != nil {
		t.Fatal(err)
	}
	db, err := engine.OpenNew(b, &engine.Options{Name: "t", Writer: "e2e"})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for i := range 9 {
		time.Sleep(15 * time.Millisecond) // commit times a few milliseconds apart
		more := rollouts.Batch(testenv.Allocator(t), 42, 0, int64(5+i*5), 5)
		_, err := db.Append(ctx, engine.AppendOptions{}, more)
		more.Release()
		if err != nil {
			t.Fatal(err)
		}
	}
	srv := run(t, "strata", "serve", "--bucket", root, "--listen", "127.0.0.1:0", "--instance", "asof", "--token", "e2e-token")
	defer func() { srv.signal(syscall.SIGTERM); srv.wait(t, time.Minute) }()
	cat, err := rest.NewCatalog(ctx, "strata", serveAddr(t, srv)+"/iceberg", rest.WithOAuthToken("e2e-token"), rest.WithAdditionalProps(icebergProps(minio)))
	if err != nil {
		t.Fatal(err)
	}
	tbl, err := cat.LoadTable(ctx, itable.Identifier{"default", "t"})
	if err != nil {
		t.Fatal(err)
	}
	snaps := tbl.Metadata().Snapshots()
	if len(snaps) != 10 {
		t.Fatalf("%d snapshots, want 10", len(snaps))
	}
	for _, s := range snaps {
		at := time.UnixMilli(s.TimestampMs).UTC().Format(time.RFC3339Nano)
		out := run(t, "strata", "scan", u, "--as-of", at, "--columns", "id", "--format", "csv")
		out.wait(t, time.Minute)
		if code := out.cmd.ProcessState.ExitCode(); code != 0 {
			t.Fatalf("strata scan --as-of %s: exit %d\n%s", at, code, out.stderr())
		}
		var strata []int64
		for line := range strings.Lines(out.stdout()) {
			if id, err := strconv.ParseInt(strings.TrimSpace(line), 10, 64); err == nil {
				strata = append(strata, id)
			}
		}
		slices.Sort(strata)
		engine := engineIDsAt(t, tbl, s.SnapshotID)
		if !slices.Equal(strata, engine) {
			t.Fatalf("as of %s (snapshot %d): strata scan reads %d ids, iceberg-go %d", at, s.SnapshotID, len(strata), len(engine))
		}
		if m, err := table.VersionAsOf(ctx, b, time.UnixMilli(s.TimestampMs)); err != nil || int64(m.Version) != s.SnapshotID {
			t.Fatalf("as of %s: %v, the snapshot is %d", at, err, s.SnapshotID)
		}
	}
}

// engineIDsAt reads the ids of a snapshot with iceberg-go, sorted.
func engineIDsAt(t *testing.T, tbl *itable.Table, snapshot int64) []int64 {
	t.Helper()
	_, it, err := tbl.Scan(itable.WithSnapshotID(snapshot), itable.WithSelectedFields("id")).ToArrowRecords(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var ids []int64
	for rec, err := range it {
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, rec.Column(0).(*array.Int64).Int64Values()...)
		rec.Release()
	}
	slices.Sort(ids)
	return ids
}
