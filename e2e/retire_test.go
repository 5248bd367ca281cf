package e2e

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/compactor"
	"github.com/stratadb/strata/harness/testenv"
	"github.com/stratadb/strata/table/format"
)

// A server in a Deployment writes through a shard named after its pod, and
// every rollout gives it a new name. Ten servers, one after the other under
// new names on one MinIO table, each appending through its shard, half of
// them stopped (their shard drained and merged) and half killed (their
// rows in the WAL alone): the Job adopts the killed ones' shards and
// compacts, and a collection past the retirement age leaves no object of
// any of the ten shards, nor any fleet object of theirs, and every
// acknowledged row in the table once.
func TestShardsOfServersGoneForGoodAreRetired(t *testing.T) {
	t.Parallel() // it waits on processes most of its time: it runs beside the others (not beside a test that stops MinIO)
	root := testenv.MinIO(t).URL(t)
	u := strings.Replace(root, "?", "/events?", 1)
	port := freePort(t)
	api := fmt.Sprintf("http://127.0.0.1:%d/api/v1/tables/events", port)
	post := func(method, url, body string) (int, string) {
		req, err := http.NewRequest(method, url, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		if method == "POST" {
			req.Header.Set("Content-Type", "application/x-ndjson")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		data, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(data)
	}
	var acked []int64
	for pod := range 10 {
		srv := run(t, "strata", "serve", "--bucket", root, "--listen", fmt.Sprintf("127.0.0.1:%d", port),
			"--instance", fmt.Sprintf("api-7d9f-%d", pod), "--flush-interval", "1h", "--merge-interval", "1h", "--shutdown-grace", "1s")
		waitUp(t, fmt.Sprintf("http://127.0.0.1:%d/healthz", port))
		if pod == 0 {
			if code, msg := post("PUT", api, `{"fields":[{"name":"id","type":"int64"}]}`); code != 201 {
				t.Fatalf("create: %d %s", code, msg)
			}
		}
		var lines strings.Builder
		for i := range 20 {
			fmt.Fprintf(&lines, "{\"id\": %d}\n", pod*100+i)
		}
		if code, msg := post("POST", api+"/rows?through=shard", lines.String()); code != 200 {
			t.Fatalf("pod %d: append: %d %s", pod, code, msg)
		}
		for i := range 20 {
			acked = append(acked, int64(pod*100+i))
		}
		if pod%2 == 0 {
			srv.signal(syscall.SIGTERM)
		} else {
			srv.signal(syscall.SIGKILL)
		}
		srv.wait(t, time.Minute)
	}
	// The Job: fleet merge, adoption of the killed servers' shards,
	// compaction. MinIO dates an object to the second: the last server's
	// shard is quiet past --adopt-after only a second on.
	time.Sleep(2 * time.Second)
	job := run(t, "strata-compactor", "--once", "--table", u, "--adopt-after", "1ms", "--min-fragments", "2")
	job.wait(t, 2*time.Minute)
	if code := job.cmd.ProcessState.ExitCode(); code != 0 {
		t.Fatalf("the Job exited %d\n%s", code, lastLines(job.stderr(), 20))
	}

	b, err := blob.Open(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	shardsLeft := func() []string {
		var left []string
		for _, prefix := range []string{format.ShardsDir, format.FleetDir} {
			for o, err := range blob.List(ctx, b, prefix, 0) {
				if err != nil {
					t.Fatal(err)
				}
				left = append(left, o.Key)
			}
		}
		return left
	}
	if len(shardsLeft()) == 0 {
		t.Fatal("no shard object before the retirement: the case this checks did not arise")
	}
	// Collections a day on (past the 24h retirement age): the first
	// retires the shards, and with the versions before the compaction
	// collected, the merged generations go too.
	later := time.Now().Add(25 * time.Hour)
	var retired []string
	for range 2 {
		res, err := compactor.GC(ctx, b, &compactor.GCPolicy{KeepVersions: 1}, later)
		if err != nil {
			t.Fatal(err)
		}
		retired = append(retired, res.ShardsRetired...)
	}
	if len(retired) != 10 {
		t.Errorf("retired %d shards %v, want the 10 servers'", len(retired), retired)
	}
	if left := shardsLeft(); len(left) > 0 {
		t.Fatalf("%d objects of the servers' shards are left after the retirement age, e.g. %v", len(left), left[:min(5, len(left))])
	}
	if n := checkOnce(t, u, acked); n != len(acked) {
		t.Fatalf("the table holds %d rows, want the %d acknowledged", n, len(acked))
	}
	t.Logf("10 servers under new names, 5 killed: %d rows once, 10 shards retired, no shard object left", len(acked))
}
