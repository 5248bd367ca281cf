package e2e

import (
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stratadb/strata/client"
	"github.com/stratadb/strata/harness/rollouts"
	"github.com/stratadb/strata/harness/testenv"
)

// Four worker processes on MinIO; one is killed with SIGKILL after it has
// acknowledged rows it never flushed, and never comes back. A compactor
// pass with a short adoption age adopts its shard: every row it
// acknowledged is in a plain scan. Then a worker starts under that shard
// again: nothing lost, nothing twice.
func TestAKilledWorkersRowsAreAdopted(t *testing.T) {
	t.Parallel() // it waits on processes most of its time: it runs beside the others (not beside a test that stops MinIO)
	minio := testenv.MinIO(t)
	u := strings.Replace(minio.URL(t), "?", "/rollouts?", 1)
	var workers []*proc
	for w := range 3 {
		workers = append(workers, run(t, "strata", workerArgs(u, w)...))
	}
	waitForTable(t, u)
	// The one that dies flushes rarely: its rows are in its WAL only.
	doomed := run(t, "strata", "worker", u, "--worker", "3", "--rows", "20", "--every", "10ms",
		"--flush-interval", "1h", "--merge-interval", "1h")
	for len(acked(doomed.stdout())) < 200 {
		time.Sleep(50 * time.Millisecond)
	}
	doomed.signal(syscall.SIGKILL)
	doomed.wait(t, 10*time.Second)
	lost := acked(doomed.stdout())
	// Quiet longer than the adoption age by the store's clock, which the
	// Job reads from an object's time: whole seconds on S3.
	time.Sleep(2500 * time.Millisecond)
	job := run(t, "strata-compactor", "--once", "--table", u, "--adopt-after", "1s", "--no-gc")
	job.wait(t, time.Minute)
	if code := job.cmd.ProcessState.ExitCode(); code != 0 || !strings.Contains(job.stdout(), "1 shards adopted") {
		t.Fatalf("compactor: exit %d\n%s\n%s", code, job.stdout(), lastLines(job.stderr(), 5))
	}
	seen := idsIn(t, u)
	for _, id := range lost {
		if seen[id] != 1 {
			t.Fatalf("an acknowledged row of the killed worker, id %d, is in the table %d times after the adoption", id, seen[id])
		}
	}
	t.Logf("the killed worker had acknowledged %d rows; the adoption put them in the table:\n%s", len(lost), lastLines(job.stderr(), 3))
	var all []int64
	all = append(all, lost...)
	for _, p := range workers {
		p.signal(syscall.SIGTERM)
		p.wait(t, time.Minute)
		if code := p.cmd.ProcessState.ExitCode(); code != 0 {
			t.Fatalf("worker: exit %d\n%s", code, p.stderr())
		}
		all = append(all, acked(p.stdout())...)
	}
	back := run(t, "strata", "worker", u, "--worker", "3", "--rows", "20", "--appends", "10")
	back.wait(t, time.Minute)
	if code := back.cmd.ProcessState.ExitCode(); code != 0 {
		t.Fatalf("the worker back: exit %d\n%s", code, back.stderr())
	}
	// It goes on after the rows its shard holds: the acknowledged ones,
	// and the append in flight when it was killed if that one landed.
	again := acked(back.stdout())
	from := 3*rollouts.IDBase + int64(len(lost))
	if len(again) != 200 || (again[0] != from && again[0] != from+20) {
		t.Fatalf("the worker back acknowledged %d rows from id %d; want 200 from %d (or %d)", len(again), again[0], from, from+20)
	}
	all = append(all, again...)
	// Beyond the acknowledged rows, at most the append the killed worker
	// had in flight (it may have landed unacknowledged), once.
	if n := checkOnce(t, u, all); n < len(all) || n > len(all)+20 {
		t.Fatalf("%d acknowledged rows, the table holds %d", len(all), n)
	}
}

// A checkpoint through the server while four worker processes append,
// flush (every 200 ms) and merge (every 5 s) on their own ends without
// error, and leaves in the table every row that was in a flushed
// generation when it began (every row a worker acknowledged a second
// before) and every row the server acknowledged.
func TestCheckpointOverTheWholeFleet(t *testing.T) {
	t.Parallel() // it waits on processes most of its time: it runs beside the others (not beside a test that stops MinIO)
	minio := testenv.MinIO(t)
	root := minio.URL(t)
	u := strings.Replace(root, "?", "/rollouts?", 1)
	var workers []*proc
	for w := range 4 {
		workers = append(workers, run(t, "strata", "worker", u, "--worker", fmt.Sprint(w), "--rows", "20", "--every", "10ms",
			"--flush-interval", "200ms", "--merge-interval", "5s"))
	}
	waitForTable(t, u)
	srv := run(t, "strata", "serve", "--bucket", root, "--listen", "127.0.0.1:0", "--instance", "e2e", "--merge-interval", "1h")
	addr := serverAddr(t, srv)
	c, err := client.New(addr, nil)
	if err != nil {
		t.Fatal(err)
	}
	var served []int64
	for i := range 5 {
		rec := rollouts.Batch(testenv.Allocator(t), 42, 50, int64(i*20), 20)
		if _, err := c.Append(ctx, "rollouts", rec); err != nil {
			t.Fatal(err)
		}
		rec.Release()
		for j := range 20 {
			served = append(served, 50*rollouts.IDBase+int64(i*20+j))
		}
	}
	time.Sleep(time.Second)
	var before []int64
	for _, p := range workers {
		before = append(before, acked(p.stdout())...)
	}
	time.Sleep(time.Second) // each of those rows is a second old
	start := time.Now()
	cp := run(t, "strata", "checkpoint", "rollouts", "--server", addr)
	cp.wait(t, 2*time.Minute)
	if code := cp.cmd.ProcessState.ExitCode(); code != 0 {
		t.Fatalf("checkpoint: exit %d after %v\n%s", code, time.Since(start), cp.stderr())
	}
	took := time.Since(start)
	seen := idsIn(t, u)
	for _, id := range append(before, served...) {
		if seen[id] != 1 {
			t.Fatalf("id %d, acknowledged before the checkpoint, is in the table %d times after it", id, seen[id])
		}
	}
	t.Logf("checkpoint took %v while 4 workers appended; %d rows acknowledged a second before it and %d through the server are in the table", took.Round(time.Millisecond), len(before), len(served))
	var all []int64
	for _, p := range workers {
		p.signal(syscall.SIGTERM)
		p.wait(t, time.Minute)
		all = append(all, acked(p.stdout())...)
	}
	srv.signal(syscall.SIGTERM)
	srv.wait(t, time.Minute)
	if code := srv.cmd.ProcessState.ExitCode(); code != 0 {
		t.Fatalf("serve: exit %d\n%s", code, srv.stderr())
	}
	checkOnce(t, u, append(all, served...))
}

func serverAddr(t *testing.T, srv *proc) string {
	t.Helper()
	for range 200 {
		for _, line := range strings.Split(srv.stdout(), "\n") {
			if _, rest, ok := strings.Cut(line, "listening on "); ok {
				addr, _, _ := strings.Cut(rest, ",")
				return addr
			}
		}
		time.Sleep(25 * time.Millisecond)
	}
	t.Fatalf("the server did not start:\n%s", srv.stderr())
	return ""
}
