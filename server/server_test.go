package server_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/stratadb/strata/api"
	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/blob/fault"
	"github.com/stratadb/strata/client"
	"github.com/stratadb/strata/commit"
	"github.com/stratadb/strata/compactor"
	"github.com/stratadb/strata/harness/rollouts"
	"github.com/stratadb/strata/harness/testenv"
	"github.com/stratadb/strata/server"
	"github.com/stratadb/strata/table"
	"github.com/stratadb/strata/table/format"
	"github.com/stratadb/strata/walshard"
)

var ctx = context.Background()

func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }

type fixture struct {
	srv    *server.Server
	http   *httptest.Server
	c      *client.Client
	faults *fault.Bucket // the last bucket the server opened, wrapped
	mu     sync.Mutex
}

// start serves the tables under root; opts may set a token or limits.
func start(t testing.TB, root string, opts server.Options) *fixture {
	t.Helper()
	f := &fixture{}
	opts.Bucket = root
	if opts.Instance == "" {
		opts.Instance = "test"
	}
	if opts.Log == nil {
		// Warnings and errors only: not a line per request.
		opts.Log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	opts.Open = func(ctx context.Context, u string) (blob.Bucket, error) {
		b, err := blob.Open(ctx, u)
		if err != nil {
			return nil, err
		}
		fb := fault.Wrap(b, nil)
		f.mu.Lock()
		f.faults = fb
		f.mu.Unlock()
		return fb, nil
	}
	srv, err := server.New(&opts)
	if err != nil {
		t.Fatal(err)
	}
	f.srv = srv
	// As strata serve serves it: the framing guard on each connection.
	f.http = httptest.NewUnstartedServer(nil)
	f.http.Config = srv.HTTPServer()
	f.http.Listener = server.Listener(f.http.Listener)
	f.http.Start()
	t.Cleanup(func() {
		f.http.Close()
		_ = srv.Shutdown(ctx)
	})
	c, err := client.New(f.http.URL, &client.Options{Token: opts.Token})
	if err != nil {
		t.Fatal(err)
	}
	f.c = c
	return f
}

func (f *fixture) inject(inj fault.Injector) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.faults.SetInjector(inj)
}

func ids(t *testing.T, recs []arrow.RecordBatch) map[int64]int {
	t.Helper()
	out := map[int64]int{}
	for _, rec := range recs {
		col := rec.Column(rec.Schema().FieldIndices("id")[0]).(*array.Int64)
		for _, id := range col.Int64Values() {
			out[id]++
		}
		rec.Release()
	}
	return out
}

func raw(t testing.TB, f *fixture, method, path, ctype, body, token string) (int, string) {
	t.Helper()
	h := http.Header{}
	if ctype != "" {
		h.Set("Content-Type", ctype)
	}
	if token != "" {
		h.Set("Authorization", "Bearer "+token)
	}
	resp, data := send(t, f, method, path, h, body)
	return resp.StatusCode, data
}

// send makes one request with headers h and returns the answer with its
// body read (and closed).
func send(t testing.TB, f *fixture, method, path string, h http.Header, body string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(method, f.http.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	maps.Copy(req.Header, h)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(data)
}

func TestTableRoutes(t *testing.T) {
	f := start(t, "file://"+t.TempDir(), server.Options{})
	info, err := f.c.CreateTable(ctx, "rollouts", rollouts.Schema)
	if err != nil || info.Version != 1 || len(info.Schema.Fields) != 7 {
		t.Fatalf("create: %+v, %v", info, err)
	}
	if _, err := f.c.CreateTable(ctx, "rollouts", rollouts.Schema); !client.IsStatus(err, http.StatusConflict) {
		t.Fatalf("create twice: %v", err)
	}
	// The JSON schema form.
	code, body := raw(t, f, "PUT", "/api/v1/tables/events", "application/json", `{"fields":[{"name":"id","type":"int64"},{"name":"msg","type":"string","nullable":true}]}`, "")
	if code != http.StatusCreated || !strings.Contains(body, `"type":"int64"`) {
		t.Fatalf("create from JSON: %d %s", code, body)
	}
	code, body = raw(t, f, "PUT", "/api/v1/tables/bad", "application/json", `{"fields":[{"name":"x","type":"complex128"}]}`, "")
	if code != http.StatusBadRequest || !strings.Contains(body, `"code":"bad_request"`) {
		t.Fatalf("create with a bad type: %d %s", code, body)
	}
	// Rows: Arrow in, JSON lines in, scans out both ways.
	rec := rollouts.Batch(testenv.Allocator(t), 42, 0, 0, 50)
	defer rec.Release()
	if n, err := f.c.Append(ctx, "rollouts", rec); err != nil || n != 50 {
		t.Fatalf("append: %d %v", n, err)
	}
	code, body = raw(t, f, "POST", "/api/v1/tables/events/rows", "application/x-ndjson", "{\"id\":1,\"msg\":\"a\"}\n{\"id\":2,\"msg\":null}\n", "")
	if code != http.StatusOK || !strings.Contains(body, `"rows":2`) {
		t.Fatalf("append JSON lines: %d %s", code, body)
	}
	// The appends are in the shard's memtable: the client that made them
	// reads them at once, another only once merged.
	recs, err := f.c.Scan(ctx, "rollouts", client.ScanOptions{Columns: []string{"id", "reward"}, Filter: "id >= 10 AND id < 20"})
	if got := ids(t, recs); err != nil || len(got) != 10 {
		t.Fatalf("the appending client's scan before any merge: %d ids, %v", len(got), err)
	}
	merged, err := client.New(f.http.URL, &client.Options{IgnoreOwnWrites: true})
	if err != nil {
		t.Fatal(err)
	}
	recs, err = merged.Scan(ctx, "rollouts", client.ScanOptions{Columns: []string{"id", "reward"}, Filter: "id >= 10 AND id < 20"})
	if got := ids(t, recs); err != nil || len(got) != 0 {
		t.Fatalf("base table before any merge holds %d ids, %v", len(got), err)
	}
	if err := f.c.CheckpointLSM(ctx, "rollouts"); err != nil {
		t.Fatal(err)
	}
	recs, err = f.c.Scan(ctx, "rollouts", client.ScanOptions{Columns: []string{"id", "reward"}, Filter: "id >= 10 AND id < 20"})
	if got := ids(t, recs); err != nil || len(got) != 10 {
		t.Fatalf("scan after checkpoint: %d ids, %v", len(got), err)
	}
	code, body = raw(t, f, "GET", "/api/v1/tables/rollouts/rows?format=jsonl&columns=id,worker&limit=3", "", "", "")
	if code != http.StatusOK || strings.Count(body, "\n") != 3 || !strings.Contains(body, `"worker":"w00"`) {
		t.Fatalf("scan as JSON lines: %d %q", code, body)
	}
	code, body = raw(t, f, "GET", "/api/v1/tables/rollouts/rows?filter=nope%20%3E%201", "", "", "")
	if code != http.StatusBadRequest {
		t.Fatalf("scan with a bad filter: %d %s", code, body)
	}
	recs, err = f.c.Take(ctx, "rollouts", api.TakeRequest{Keys: []any{3, 44, 999}})
	if got := ids(t, recs); err != nil || len(got) != 2 || got[3] != 1 || got[44] != 1 {
		t.Fatalf("take: %v %v", got, err)
	}
	vs, err := f.c.Versions(ctx, "rollouts", 10, true)
	if err != nil || len(vs) < 2 || vs[0].Kind != string(format.KindMerge) {
		t.Fatalf("versions: %+v %v", vs, err)
	}
	if err := f.c.CreateTag(ctx, "rollouts", "first", 0); err != nil {
		t.Fatal(err)
	}
	if err := f.c.CreateTag(ctx, "rollouts", "first", 0); !client.IsStatus(err, http.StatusConflict) {
		t.Fatalf("tag twice: %v", err)
	}
	if tags, err := f.c.Tags(ctx, "rollouts"); err != nil || len(tags) != 1 {
		t.Fatalf("tags: %+v %v", tags, err)
	}
	// Wrong schema: 400, nothing written.
	other := arrow.NewSchema([]arrow.Field{{Name: "x", Type: arrow.PrimitiveTypes.Float64}}, nil)
	bld := array.NewRecordBuilder(testenv.Arrow, other)
	defer bld.Release()
	bld.Field(0).(*array.Float64Builder).Append(1)
	bad := bld.NewRecordBatch()
	defer bad.Release()
	if _, err := f.c.Append(ctx, "rollouts", bad); !client.IsStatus(err, http.StatusBadRequest) {
		t.Fatalf("append of another schema: %v", err)
	}
	// Drop.
	if err := f.c.Drop(ctx, "events"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.c.Describe(ctx, "events"); !client.IsStatus(err, http.StatusNotFound) {
		t.Fatalf("describe after drop: %v", err)
	}
	if _, err := f.c.Describe(ctx, "nope"); !client.IsStatus(err, http.StatusNotFound) {
		t.Fatalf("describe of nothing: %v", err)
	}
	// Metrics.
	code, body = raw(t, f, "GET", "/metrics", "", "", "")
	if code != 200 || !strings.Contains(body, `strata_http_requests_total{code="200",route="POST /api/v1/tables/{name}/rows"}`) ||
		!strings.Contains(body, "strata_object_store_requests_total") || !strings.Contains(body, "strata_rows_appended_total 52") ||
		!strings.Contains(body, `strata_fleet_merges_total 1`) || !strings.Contains(body, `strata_fleet_merged_generations_total 1`) {
		t.Fatalf("metrics: %d\n%s", code, body)
	}
}

func TestBadNamesAuthAndLimits(t *testing.T) {
	f := start(t, "file://"+t.TempDir(), server.Options{Token: "s3cret", MaxBodyBytes: 1000})
	authed, err := client.New(f.http.URL, &client.Options{Token: "s3cret"})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"..%2Fx", "a%2F%2Fb", "a%2F.b", strings.Repeat("x", 200), ".hidden", "a%20b"} {
		code, body := raw(t, f, "GET", "/api/v1/tables/"+name, "", "", "s3cret")
		if code != http.StatusBadRequest || !strings.Contains(body, "bad_table_name") {
			t.Errorf("name %q: %d %s", name, code, body)
		}
	}
	if code, _ := raw(t, f, "GET", "/api/v1/tables/", "", "", "s3cret"); code != http.StatusNotFound {
		t.Errorf("empty name: %d", code)
	}
	if code, body := raw(t, f, "GET", "/api/v1/tables/x", "", "", ""); code != http.StatusUnauthorized || !strings.Contains(body, "unauthorized") {
		t.Fatalf("no token: %d %s", code, body)
	}
	if code, _ := raw(t, f, "GET", "/api/v1/tables/x", "", "", "wrong"); code != http.StatusUnauthorized {
		t.Fatalf("wrong token: %d", code)
	}
	if code, _ := raw(t, f, "GET", "/healthz", "", "", ""); code != http.StatusOK {
		t.Fatalf("healthz needs no token: %d", code)
	}
	if code, _ := raw(t, f, "GET", "/metrics", "", "", ""); code != http.StatusUnauthorized {
		t.Fatalf("metrics without the token, OpenMetrics unset: %d", code)
	}
	schema := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}}, nil)
	if _, err := authed.CreateTable(ctx, "small", schema); err != nil {
		t.Fatal(err)
	}
	big := "{\"id\":1}\n"
	code, body := raw(t, f, "POST", "/api/v1/tables/small/rows", "application/x-ndjson", strings.Repeat(big, 500), "s3cret")
	if code != http.StatusRequestEntityTooLarge {
		t.Fatalf("oversize body: %d %s", code, body)
	}
}

func TestAcceptedAnswersHaveNoBody(t *testing.T) {
	f := start(t, "file://"+t.TempDir(), server.Options{})
	if _, err := f.c.CreateTable(ctx, "t", rollouts.Schema); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"/compact", "/lsm/flush", "/lsm/merge"} {
		code, body := raw(t, f, "POST", "/api/v1/tables/t"+path, "", "", "")
		if code != http.StatusAccepted || body != "" {
			t.Fatalf("POST %s: %d %q", path, code, body)
		}
	}
	// The client's calls decode nothing on 202.
	time.Sleep(50 * time.Millisecond)
	if err := f.c.Flush(ctx, "t"); err != nil {
		t.Fatal(err)
	}
	// The compaction of an empty table finds nothing to do: it records no
	// run (no "v0, 0 → 0" in the history).
	deadline := time.Now().Add(10 * time.Second)
	for {
		st, err := f.c.CompactStats(ctx, "t")
		if err != nil {
			t.Fatal(err)
		}
		if !st.Running {
			if len(st.History) > 0 {
				t.Fatalf("a compaction with nothing to do recorded a run: %+v", st.History)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the compaction never ended: %+v", st)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// While the shard's merge is held up (slow manifest commits), another
// merge request gets 429 and a compaction request 409.
func TestBusyAnswers(t *testing.T) {
	f := start(t, "file://"+t.TempDir(), server.Options{})
	if _, err := f.c.CreateTable(ctx, "t", rollouts.Schema); err != nil {
		t.Fatal(err)
	}
	rec := rollouts.Batch(testenv.Allocator(t), 42, 0, 0, 20)
	defer rec.Release()
	if _, err := f.c.Append(ctx, "t", rec); err != nil {
		t.Fatal(err)
	}
	code, _ := raw(t, f, "POST", "/api/v1/tables/t/lsm/flush", "", "", "")
	if code != http.StatusAccepted {
		t.Fatal(code)
	}
	testenv.Eventually(t, 10*time.Second, "the flush to record its generation", func() bool {
		st, err := f.c.LSMStats(ctx, "t", false)
		return err == nil && len(st.Shards) == 1 && st.Shards[0].PendingGenerations > 0
	})
	// (The flush object that records the generation is where fleet
	// merges look: recorded, it is found.)
	f.inject(fault.OnKeys(regexp.MustCompile(`^_versions/`), fault.OnOps(fault.Always(fault.Fault{Delay: 800 * time.Millisecond}), fault.OpPutIfAbsent)))
	if code, _ := raw(t, f, "POST", "/api/v1/tables/t/lsm/merge", "", "", ""); code != http.StatusAccepted {
		t.Fatalf("first merge: %d", code)
	}
	testenv.Eventually(t, 10*time.Second, "the first merge to run", func() bool {
		st, err := f.c.LSMStats(ctx, "t", false)
		return err == nil && st.Merging
	})
	// Under either name, the same merge: the old name finds it running.
	for _, path := range []string{"/lsm/merge", "/lsm/compact"} {
		if code, body := raw(t, f, "POST", "/api/v1/tables/t"+path, "", "", ""); code != http.StatusTooManyRequests || !strings.Contains(body, "merge_running") {
			t.Fatalf("POST %s while merging: %d %s", path, code, body)
		}
	}
	st, err := f.c.LSMStats(ctx, "t", true)
	if err != nil || len(st.Shards) != 1 || !st.Merging || st.Shards[0].MemtableRows == nil || st.Shards[0].PendingRows == nil ||
		st.Shards[0].Merging == nil || st.Shards[0].Compacting == nil || *st.Shards[0].Compacting != *st.Shards[0].Merging {
		t.Fatalf("stats while merging: %+v %v", st, err)
	}
	// The compaction's lease and history writes are slow too, so it is
	// still running when the second request comes.
	f.inject(fault.OnKeys(regexp.MustCompile(`^(_versions|_compactor)/`), fault.OnOps(fault.Always(fault.Fault{Delay: 800 * time.Millisecond}), fault.OpPutIfAbsent)))
	if code, _ := raw(t, f, "POST", "/api/v1/tables/t/compact", "", "", ""); code != http.StatusAccepted {
		t.Fatalf("compaction: %d", code)
	}
	if code, body := raw(t, f, "POST", "/api/v1/tables/t/compact", "", "", ""); code != http.StatusConflict || !strings.Contains(body, "compaction_running") {
		t.Fatalf("compaction while compacting: %d %s", code, body)
	}
	f.inject(nil)
}

// CheckpointLSM ends while four writers keep appending through the server,
// and leaves every generation at or below its target merged.
func TestCheckpointEndsUnderSustainedWrites(t *testing.T) {
	f := start(t, "file://"+t.TempDir(), server.Options{})
	if _, err := f.c.CreateTable(ctx, "t", rollouts.Schema); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var acked atomic.Int64
	for w := range 4 {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				rec := rollouts.Batch(testenv.Allocator(t), 42, w, int64(i*10), 10)
				_, err := f.c.Append(ctx, "t", rec)
				rec.Release()
				if err != nil {
					t.Error(err)
					return
				}
				acked.Add(10)
				if i%5 == 4 {
					_ = f.c.Flush(ctx, "t")
				}
			}
		})
	}
	testenv.Eventually(t, 10*time.Second, "the writers to start", func() bool { return acked.Load() > 0 })
	before, err := f.c.LSMStats(ctx, "t", false)
	if err != nil {
		t.Fatal(err)
	}
	c, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	if err := f.c.CheckpointLSM(c, "t"); err != nil {
		t.Fatalf("checkpoint under writes: %v", err)
	}
	after, err := f.c.LSMStats(ctx, "t", false)
	if err != nil {
		t.Fatal(err)
	}
	close(stop)
	wg.Wait()
	for _, s := range before.Shards {
		for _, a := range after.Shards {
			if a.Shard == s.Shard && a.Watermark < s.NewestGeneration {
				t.Fatalf("shard %s: watermark %d below the generation %d that existed before the checkpoint", s.Shard, a.Watermark, s.NewestGeneration)
			}
		}
	}
	// And at the end every acknowledged row is in the table once.
	if err := f.c.CheckpointLSM(ctx, "t"); err != nil {
		t.Fatal(err)
	}
	recs, err := f.c.Scan(ctx, "t", client.ScanOptions{Columns: []string{"id"}})
	got := ids(t, recs)
	if err != nil || int64(len(got)) != acked.Load() {
		t.Fatalf("%d distinct ids in the table, %d acknowledged (%v)", len(got), acked.Load(), err)
	}
	for id, n := range got {
		if n != 1 {
			t.Fatalf("id %d appears %d times", id, n)
		}
	}
}

func TestCheckpointFailsWhenMergesStall(t *testing.T) {
	f := start(t, "file://"+t.TempDir(), server.Options{})
	if _, err := f.c.CreateTable(ctx, "t", rollouts.Schema); err != nil {
		t.Fatal(err)
	}
	rec := rollouts.Batch(testenv.Allocator(t), 42, 0, 0, 10)
	defer rec.Release()
	if _, err := f.c.Append(ctx, "t", rec); err != nil {
		t.Fatal(err)
	}
	// Every manifest commit fails: merges never land.
	f.inject(fault.OnKeys(regexp.MustCompile(`^_versions/`), fault.OnOps(fault.Always(fault.Fault{Action: fault.Fail, Err: &blob.Error{Op: "put-if-absent", Kind: blob.ErrPermanent, Err: errors.New("refused")}}), fault.OpPutIfAbsent)))
	c, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	err := f.c.CheckpointLSM(c, "t", client.CheckpointOptions{Poll: 10 * time.Millisecond, MaxStalls: 20})
	if err == nil || errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "no progress") {
		t.Fatalf("checkpoint with stalled merges: %v, want a no-progress error", err)
	}
	f.inject(nil)
}

// The flush phase is bounded too: when the server's flush can make no
// generation (every state write refused), the checkpoint fails after its
// polls instead of waiting for ever.
func TestCheckpointFailsWhenTheFlushStalls(t *testing.T) {
	f := start(t, "file://"+t.TempDir(), server.Options{})
	if _, err := f.c.CreateTable(ctx, "t", rollouts.Schema); err != nil {
		t.Fatal(err)
	}
	rec := rollouts.Batch(testenv.Allocator(t), 42, 0, 0, 10)
	defer rec.Release()
	if _, err := f.c.Append(ctx, "t", rec); err != nil {
		t.Fatal(err)
	}
	f.inject(fault.OnKeys(regexp.MustCompile(`^_fleet/flush/`), fault.OnOps(fault.Always(fault.Fault{Action: fault.Fail, Err: &blob.Error{Op: "put-if-absent", Kind: blob.ErrPermanent, Err: errors.New("refused")}}), fault.OpPutIfAbsent)))
	defer f.inject(nil)
	c, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	err := f.c.CheckpointLSM(c, "t", client.CheckpointOptions{Poll: 10 * time.Millisecond, MaxStalls: 20})
	if err == nil || errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "made no generation") {
		t.Fatalf("checkpoint with a stalled flush: %v, want a bounded failure", err)
	}
}

func TestShutdownFlushesAndMerges(t *testing.T) {
	root := "file://" + t.TempDir()
	f := start(t, root, server.Options{})
	if _, err := f.c.CreateTable(ctx, "t", rollouts.Schema); err != nil {
		t.Fatal(err)
	}
	rec := rollouts.Batch(testenv.Allocator(t), 42, 0, 0, 30)
	defer rec.Release()
	if _, err := f.c.Append(ctx, "t", rec); err != nil {
		t.Fatal(err)
	}
	f.http.Close()
	if err := f.srv.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	b, err := blob.Open(ctx, root+"/t")
	if err != nil {
		t.Fatal(err)
	}
	s, err := table.Open(ctx, b, nil)
	if err != nil || s.Manifest().Rows() != 30 {
		t.Fatalf("after shutdown the table holds %v rows (%v)", s.Manifest().Rows(), err)
	}
	// A draining server answers 503.
	rr := httptest.NewRecorder()
	f.srv.Handler().ServeHTTP(rr, httptest.NewRequest("GET", "/api/v1/tables/t", bytes.NewReader(nil)))
	if rr.Code != http.StatusServiceUnavailable {
		t.Fatalf("draining: %d", rr.Code)
	}
}

// Against MinIO: append through the server, checkpoint, compact, scan:
// every row once.
// Appends, checkpoints, a compaction and a scan through the HTTP API on
// MinIO; also with the server's shard writing each append's rows once
// (ReuseBytes): then every append is a fragment until the compaction.
func TestEndToEndOnMinIO(t *testing.T) {
	for _, reuse := range []int64{0, 1} {
		t.Run(fmt.Sprintf("reuse=%d", reuse), func(t *testing.T) {
			endToEnd(t, testenv.MinIO(t).URL(t), reuse)
		})
	}
}

func endToEnd(t *testing.T, root string, reuse int64) {
	f := start(t, root, server.Options{Shard: walshard.Options{ReuseBytes: reuse}})
	if _, err := f.c.CreateTable(ctx, "rollouts", rollouts.Schema); err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		rec := rollouts.Batch(testenv.Allocator(t), 42, 1, int64(i*25), 25)
		if _, err := f.c.Append(ctx, "rollouts", rec); err != nil {
			t.Fatal(err)
		}
		rec.Release()
		if i%4 == 3 {
			if err := f.c.CheckpointLSM(ctx, "rollouts"); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := f.c.CheckpointLSM(ctx, "rollouts"); err != nil {
		t.Fatal(err)
	}
	before, err := f.c.CompactStats(ctx, "rollouts")
	if err != nil {
		t.Fatal(err)
	}
	if reuse > 0 && before.Fragments < 20 || reuse == 0 && before.Fragments > 5 {
		t.Fatalf("reuse %d: %d fragments before compaction", reuse, before.Fragments)
	}
	t.Logf("reuse %d: %d fragments before compaction", reuse, before.Fragments)
	if err := f.c.Compact(ctx, "rollouts"); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		st, err := f.c.CompactStats(ctx, "rollouts")
		if err != nil {
			t.Fatal(err)
		}
		if st.TotalCompactions == 1 && !st.Running {
			if st.Fragments != 1 {
				t.Fatalf("after compaction: %d fragments", st.Fragments)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("compaction did not finish: %+v", st)
		}
		time.Sleep(50 * time.Millisecond)
	}
	recs, err := f.c.Scan(ctx, "rollouts", client.ScanOptions{})
	got := ids(t, recs)
	if err != nil || len(got) != 500 {
		t.Fatalf("%d ids, %v", len(got), err)
	}
	for id, n := range got {
		if n != 1 {
			t.Fatalf("id %d appears %d times", id, n)
		}
	}
}

func TestEveryRouteAnswers404ForAMissingTable(t *testing.T) {
	f := start(t, "file://"+t.TempDir(), server.Options{})
	routes := []struct{ method, path, ctype, body string }{
		{"GET", "", "", ""},
		{"DELETE", "", "", ""},
		{"POST", "/rows", "application/x-ndjson", "{\"id\":1}\n"},
		{"GET", "/rows", "", ""},
		{"DELETE", "/rows?filter=id%3D1", "", ""},
		{"DELETE", "/tags/x", "", ""},
		{"POST", "/take", "application/json", `{"keys":[1]}`},
		{"GET", "/versions", "", ""},
		{"GET", "/tags", "", ""},
		{"POST", "/tags", "application/json", `{"name":"x"}`},
		{"POST", "/compact", "", ""},
		{"GET", "/compact/stats", "", ""},
		{"POST", "/lsm/flush", "", ""},
		{"POST", "/lsm/merge", "", ""},
		{"POST", "/lsm/compact", "", ""},
		{"GET", "/lsm/stats", "", ""},
	}
	for _, r := range routes {
		code, body := raw(t, f, r.method, "/api/v1/tables/missing"+r.path, r.ctype, r.body, "")
		if code != http.StatusNotFound || !strings.Contains(body, `"code":"not_found"`) {
			t.Errorf("%s %s on a missing table: %d %s", r.method, r.path, code, body)
		}
	}
	if code, body := raw(t, f, "GET", "/api/v2/nothing", "", "", ""); code != http.StatusNotFound || !strings.Contains(body, "no_route") {
		t.Errorf("unknown route: %d %s", code, body)
	}
}

// Adoptions by the compactor Job show in /compact/stats and /metrics, and
// so does a named consumer's lag.
func TestAdoptionsShowInStatsAndMetrics(t *testing.T) {
	root := "file://" + t.TempDir()
	f := start(t, root, server.Options{})
	if _, err := f.c.CreateTable(ctx, "t", rollouts.Schema); err != nil {
		t.Fatal(err)
	}
	b, err := blob.Open(ctx, root+"/t")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if err := compactor.Record(ctx, b, compactor.Run{Started: time.Now(), Adopted: []string{"w1", "w2"}}, 0); err != nil {
		t.Fatal(err)
	}
	// A consumer at version 1, two commits behind.
	if err := table.SetConsumer(ctx, b, "trainer", 1); err != nil {
		t.Fatal(err)
	}
	rec := rollouts.Batch(testenv.Allocator(t), 42, 0, 0, 20)
	defer rec.Release()
	tbl, err := commit.OpenTable(ctx, b, nil)
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := tbl.Append(ctx, rec); err != nil {
			t.Fatal(err)
		}
	}
	code, body := raw(t, f, "GET", "/api/v1/tables/t/compact/stats", "", "", "")
	if code != 200 || !strings.Contains(body, `"total_adopted":2`) || !strings.Contains(body, `"adopted":["w1","w2"]`) {
		t.Fatalf("compact stats: %d %s", code, body)
	}
	// A scrape reads nothing from the store: the count read in the
	// background shows at a later scrape.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		code, body = raw(t, f, "GET", "/metrics", "", "", "")
		// The table's label: its path under the bucket (here a folder's).
		if code == 200 && regexp.MustCompile(`strata_shards_adopted_total\{table="(?:[^"]*/)?t"\} 2`).MatchString(body) &&
			regexp.MustCompile(`strata_consumer_lag_versions\{consumer="trainer",table="(?:[^"]*/)?t"\} 2`).MatchString(body) &&
			regexp.MustCompile(`strata_consumer_position_age_seconds\{consumer="trainer",table="(?:[^"]*/)?t"\}`).MatchString(body) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("metrics: %d\n%s", code, body)
		}
	}
}

// TestScanIterStreams: the client's streaming scan yields the same rows as
// Scan, a loop left early closes the answer without error, and an error
// answer ends the sequence with a typed error.
func TestScanIterStreams(t *testing.T) {
	f := start(t, "file://"+t.TempDir(), server.Options{})
	if _, err := f.c.CreateTable(ctx, "r", rollouts.Schema); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		rec := rollouts.Batch(testenv.Allocator(t), 1, 0, int64(i*100), 100)
		_, err := f.c.Append(ctx, "r", rec)
		rec.Release()
		if err != nil {
			t.Fatal(err)
		}
		if err := f.c.CheckpointLSM(ctx, "r"); err != nil {
			t.Fatal(err)
		}
	}
	var rows int64
	batches := 0
	for rec, err := range f.c.ScanIter(ctx, "r", client.ScanOptions{Columns: []string{"id"}}) {
		if err != nil {
			t.Fatal(err)
		}
		rows += rec.NumRows()
		batches++
	}
	if rows != 300 || batches < 3 {
		t.Fatalf("streamed %d rows in %d batches, want 300 in at least 3", rows, batches)
	}
	seen := 0
	for _, err := range f.c.ScanIter(ctx, "r", client.ScanOptions{}) {
		if err != nil {
			t.Fatal(err)
		}
		seen++
		break
	}
	if seen != 1 {
		t.Fatalf("an early break saw %d batches", seen)
	}
	var last error
	for _, err := range f.c.ScanIter(ctx, "nope", client.ScanOptions{}) {
		last = err
	}
	if !client.IsStatus(last, http.StatusNotFound) {
		t.Fatalf("a missing table streams %v, want a 404", last)
	}
}

// The options idiom at the server and the client: New refuses what
// Validate refuses, with ErrInvalidOptions.
func TestServerAndClientOptionsAreValidated(t *testing.T) {
	for _, bad := range []*server.Options{
		nil,
		{Bucket: "file:///tmp/x"},
		{Bucket: "file:///tmp/x", Instance: "a/b"},
		{Bucket: "file:///tmp/x", Instance: "a", LeaseTTL: time.Second},
		{Bucket: "file:///tmp/x", Instance: "a", MaxTakeKeys: -1},
		{Bucket: "file:///tmp/x", Instance: "a", Compaction: compactor.Policy{DeletedFraction: 3}},
	} {
		if _, err := server.New(bad); !errors.Is(err, server.ErrInvalidOptions) && !errors.Is(err, compactor.ErrInvalidOptions) {
			t.Errorf("server options %+v: %v", bad, err)
		}
	}
	if o := (&server.Options{Bucket: "b", Instance: "i"}).EnsureDefaults(); o.MaxBodyBytes != 64<<20 || o.Open == nil {
		t.Fatalf("server defaults: %+v", o)
	}
	for _, bad := range []struct {
		base string
		o    *client.Options
	}{
		{"localhost:8080", nil},
		{"http://", nil},
		{"http://127.0.0.1:1", &client.Options{BaseBackoff: time.Second, MaxBackoff: time.Millisecond}},
	} {
		if _, err := client.New(bad.base, bad.o); !errors.Is(err, client.ErrInvalidOptions) {
			t.Errorf("client %q %+v: %v", bad.base, bad.o, err)
		}
	}
}

// A server killed with rows in its shard's WAL (acknowledged, not flushed)
// and started again: a checkpoint and a delete by filter treat those rows
// as acknowledged before them — the checkpoint returns only once they are
// in the table, and the delete removes those that match.
func TestARestartedServersWALRowsAreCheckpointedAndDeleted(t *testing.T) {
	root := "file://" + t.TempDir()
	first := start(t, root, server.Options{})
	if _, err := first.c.CreateTable(ctx, "t", rollouts.Schema); err != nil {
		t.Fatal(err)
	}
	rec := rollouts.Batch(testenv.Allocator(t), 42, 0, 0, 10)
	defer rec.Release()
	if n, err := first.c.Append(ctx, "t", rec); err != nil || n != 10 {
		t.Fatalf("append: %d %v", n, err)
	}
	// The process dies: nothing it does from now on reaches the store.
	first.inject(fault.Always(fault.Fault{Action: fault.Crash}))
	second := start(t, root, server.Options{})
	if err := second.c.CheckpointLSM(ctx, "t"); err != nil {
		t.Fatal(err)
	}
	recs, err := second.c.Scan(ctx, "t", client.ScanOptions{Columns: []string{"id"}})
	if got := ids(t, recs); err != nil || len(got) != 10 {
		t.Fatalf("after the restart and a checkpoint: %d rows, %v; want the 10 acknowledged", len(got), err)
	}
	third := start(t, root, server.Options{})
	second.inject(fault.Always(fault.Fault{Action: fault.Crash}))
	rec2 := rollouts.Batch(testenv.Allocator(t), 42, 0, 10, 10)
	defer rec2.Release()
	if _, err := third.c.Append(ctx, "t", rec2); err != nil {
		t.Fatal(err)
	}
	third.inject(fault.Always(fault.Fault{Action: fault.Crash}))
	fourth := start(t, root, server.Options{})
	res, err := fourth.c.Delete(ctx, "t", "id >= 0")
	if err != nil || res.Deleted != 20 {
		t.Fatalf("delete after a restart: %+v %v; want the 20 acknowledged rows deleted", res, err)
	}
}

// With OpenMetrics, /metrics answers without the token (a Prometheus that
// scrapes by pod annotation), and every other route still needs it.
func TestOpenMetricsNeedNoToken(t *testing.T) {
	f := start(t, "file://"+t.TempDir(), server.Options{Token: "s3cret", OpenMetrics: true})
	if code, body := raw(t, f, "GET", "/metrics", "", "", ""); code != http.StatusOK || !strings.Contains(body, "strata_build_info") {
		t.Fatalf("open metrics without the token: %d %.100s", code, body)
	}
	if code, _ := raw(t, f, "GET", "/api/v1/tables", "", "", ""); code != http.StatusUnauthorized {
		t.Fatalf("the tables without the token: %d", code)
	}
}
