package e2e

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/stratadb/strata/client"
	"github.com/stratadb/strata/harness/latencyproxy"
	"github.com/stratadb/strata/harness/testenv"
)

var idOnly = arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}}, nil)

// The Go client with its default options appends 4,000 rows in 400 calls
// through a proxy that loses 5% of the server's answers after the server
// acted, while the server is SIGKILLed and restarted twice: every call
// returns success and the table holds each row once.
func TestLostAnswersAndServerRestartsStoreEachAppendOnce(t *testing.T) {
	dir := t.TempDir()
	port := freePort(t)
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	serve := func() *proc {
		srv := run(t, "strata", "serve", "--bucket", "file://"+filepath.Join(dir, "tables"), "--listen", addr, "--instance", "e2e")
		waitUp(t, "http://"+addr+"/healthz")
		return srv
	}
	srv := serve()
	defer func() { srv.signal(syscall.SIGKILL); <-srv.done }()
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	p, err := latencyproxy.New("http://"+addr, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	p.LoseResponses, p.Seed = 0.05, seed
	front := httptest.NewServer(p)
	defer front.Close()
	c, err := client.New(front.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateTable(ctx, "t", idOnly); err != nil {
		t.Fatal(err)
	}
	const workers, calls, rows = 4, 100, 10
	var wg sync.WaitGroup
	failed := make(chan error, workers)
	for w := range workers {
		wg.Go(func() {
			for i := range calls {
				rec := idRows(w*100_000+i*rows, rows)
				n, err := c.Append(ctx, "t", rec)
				rec.Release()
				if err != nil || n != rows {
					failed <- fmt.Errorf("worker %d call %d: %d rows, %v", w, i, n, err)
					return
				}
			}
		})
	}
	for range 2 {
		time.Sleep(time.Second)
		srv.signal(syscall.SIGKILL)
		<-srv.done
		srv = serve()
	}
	wg.Wait()
	close(failed)
	for err := range failed {
		t.Error(err)
	}
	if p.Lost() == 0 {
		t.Fatal("no answer was lost: the test tested nothing")
	}
	direct, err := client.New("http://"+addr, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := direct.CheckpointLSM(ctx, "t"); err != nil {
		t.Fatal(err)
	}
	recs, err := direct.Scan(ctx, "t", client.ScanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var got []int64
	for _, rec := range recs {
		got = append(got, rec.Column(0).(*array.Int64).Int64Values()...)
		rec.Release()
	}
	slices.Sort(got)
	var want []int64
	for w := range workers {
		for k := range calls * rows {
			want = append(want, int64(w*100_000+k))
		}
	}
	t.Logf("%d answers lost over %d requests; %d rows stored", p.Lost(), p.Requests(), len(got))
	if !slices.Equal(got, want) {
		t.Fatalf("table holds %d rows, want each of %d once", len(got), len(want))
	}
}

// idRows is a batch of ids from, from+1, …
func idRows(from, n int) arrow.RecordBatch {
	b := array.NewInt64Builder(testenv.Arrow)
	defer b.Release()
	for k := range n {
		b.Append(int64(from + k))
	}
	col := b.NewArray()
	defer col.Release()
	return array.NewRecordBatch(idOnly, []arrow.Array{col}, int64(n))
}

// strata append is killed after the store created its commit — the
// table's manifest, or its shard's WAL entry — and before it heard; run
// again with the same arguments, it appends nothing more, and the table
// holds the rows once.
func TestAKilledAppendRunAgainAppendsItsRowsOnce(t *testing.T) {
	minio := testenv.MinIO(t)
	dir := t.TempDir()
	os.WriteFile(dir+"/s.json", []byte(`{"fields":[{"name":"id","type":"int64"}]}`), 0o644)
	var lines strings.Builder
	for id := range 1000 {
		fmt.Fprintf(&lines, "{\"id\":%d}\n", id)
	}
	os.WriteFile(dir+"/rows.jsonl", []byte(lines.String()), 0o644)
	for _, c := range []struct {
		via    []string
		commit string
		nth    int // the create that commits (a shard's first is its fence)
	}{
		{nil, "/_versions/", 1},
		{[]string{"--shard", "loader"}, "/_shards/loader/wal/", 2},
	} {
		direct := minio.URL(t)
		created := run(t, "strata", "create", direct, "--schema", dir+"/s.json")
		if created.wait(t, time.Minute); created.cmd.ProcessState.ExitCode() != 0 {
			t.Fatal(created.stderr())
		}
		var victim atomic.Pointer[proc]
		var creates atomic.Int64
		p, err := latencyproxy.New(minio.Endpoint, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		p.BeforeAnswer = func(r *http.Request, status int) {
			if r.Method == http.MethodPut && strings.Contains(r.URL.Path, c.commit) && status == http.StatusOK && creates.Add(1) == int64(c.nth) {
				v := victim.Load()
				v.signal(syscall.SIGKILL)
				<-v.done
			}
		}
		front := httptest.NewServer(p)
		viaProxy := strings.Replace(direct, url.QueryEscape(minio.Endpoint), url.QueryEscape(front.URL), 1)
		args := append([]string{"append", viaProxy, dir + "/rows.jsonl"}, c.via...)
		cut := run(t, "strata", args...)
		victim.Store(cut)
		cut.wait(t, time.Minute)
		front.Close()
		if ws := cut.cmd.ProcessState.Sys().(syscall.WaitStatus); !ws.Signaled() {
			t.Fatalf("%v: the append was not killed after its commit landed (exit %d)\n%s", c.via, cut.cmd.ProcessState.ExitCode(), cut.stderr())
		}
		again := run(t, "strata", append([]string{"append", direct, dir + "/rows.jsonl"}, c.via...)...)
		again.wait(t, time.Minute)
		if again.cmd.ProcessState.ExitCode() != 0 || !strings.Contains(again.stdout(), "already appended") {
			t.Fatalf("%v: run again: %s%s", c.via, again.stdout(), again.stderr())
		}
		t.Logf("%v: killed after the store acted; run again: %s", c.via, strings.TrimSpace(again.stdout()))
		want := make([]int64, 1000)
		for i := range want {
			want[i] = int64(i)
		}
		checkOnce(t, direct, want)
	}
}
