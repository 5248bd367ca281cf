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

// A table dropped through strata serve while a fleet worker process
// appends to it, flushes and fleet-merges: the worker learns that the
// table was dropped (not that a newer owner fenced it), acknowledges
// nothing after the drop answered, and exits; nothing of the table is
// left in MinIO; the table created again under the name takes appends,
// and the compactor Job's pass over it succeeds and installs none of the
// dropped table's rows. Before, the worker acknowledged appends after the
// drop, said "fenced by a newer owner", and its flush object failed every
// later pass. The drop waits walshard.DropWait (65 s) for the worker to
// read its claims: this test takes about 70 s.
func TestADropUnderAFleetWorkerLeavesNothingBehind(t *testing.T) {
	t.Parallel() // it waits on processes most of its time: it runs beside the others (not beside a test that stops MinIO)
	minio := testenv.MinIO(t)
	root := minio.URL(t)
	u := strings.Replace(root, "?", "/rollouts?", 1)
	old := run(t, "strata", "worker", u, "--worker", "1", "--rows", "20", "--every", "50ms",
		"--flush-interval", "200ms", "--merge-interval", "1s", "--fleet-merge")
	waitForTable(t, u)
	testenv.Eventually(t, time.Minute, "the worker's first appends and flushes", func() bool {
		return len(acked(old.stdout())) >= 200 && len(minio.Keys(t, u, "_fleet/flush/")) > 0
	})
	srv := run(t, "strata", "serve", "--bucket", root, "--listen", "127.0.0.1:0", "--instance", "e2e")
	c, err := client.New(serverAddr(t, srv), nil)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := c.Drop(ctx, "rollouts"); err != nil {
		t.Fatalf("drop after %s: %v\n%s\nthe worker:\n%s", time.Since(start), err, srv.stderr(), lastLines(old.stderr(), 5))
	}
	dropTook := time.Since(start)
	before := acked(old.stdout())
	old.wait(t, 30*time.Second)
	after := acked(old.stdout())
	if len(after) != len(before) {
		t.Fatalf("the worker acknowledged %d appends' rows after the drop answered (ids %d…)", len(after)-len(before), after[len(before)])
	}
	if code, msg := old.cmd.ProcessState.ExitCode(), old.stderr(); code == 0 || !strings.Contains(msg, "the table was dropped") || strings.Contains(msg, "newer owner") {
		t.Fatalf("the dropped table's worker: exit %d, want a failure saying the table was dropped:\n%s", code, lastLines(msg, 5))
	}
	if left := minio.Keys(t, u, ""); len(left) > 0 {
		t.Fatalf("the drop left %d objects of the table in MinIO, first %s", len(left), left[0])
	}
	// The name again: a worker creates the table, appends and flushes,
	// and leaves the merge to the Job, whose pass merges its generations.
	fresh := run(t, "strata", "worker", u, "--worker", "2", "--rows", "20", "--every", "20ms",
		"--flush-interval", "50ms", "--merge-interval", "0")
	testenv.Eventually(t, time.Minute, "the new table's worker's appends and flushes", func() bool {
		return len(acked(fresh.stdout())) >= 100 && len(minio.Keys(t, u, "_fleet/flush/")) > 0
	})
	job := run(t, "strata-compactor", "--once", "--table", u, "--no-gc")
	job.wait(t, time.Minute)
	var merged int
	_, _ = fmt.Sscanf(job.stdout()[strings.LastIndex(job.stdout(), ";")+1:], " %d generations merged", &merged)
	if code := job.cmd.ProcessState.ExitCode(); code != 0 || merged == 0 {
		t.Fatalf("the compactor Job over the table created again: exit %d, %d generations merged\n%s\n%s", code, merged, job.stdout(), lastLines(job.stderr(), 5))
	}
	fresh.signal(syscall.SIGTERM)
	fresh.wait(t, time.Minute)
	if code := fresh.cmd.ProcessState.ExitCode(); code != 0 {
		t.Fatalf("the new table's worker: exit %d\n%s", code, fresh.stderr())
	}
	added := acked(fresh.stdout())
	if n := checkOnce(t, u, added); n != len(added) {
		t.Fatalf("the table created again holds %d rows; its worker acknowledged %d", n, len(added))
	}
	for id := range idsIn(t, u) {
		if id < 2*rollouts.IDBase {
			t.Fatalf("the table created again holds row %d of the dropped table", id)
		}
	}
	t.Logf("the drop answered after %s; the worker had acknowledged %d rows, none after, and said:\n%s\nthe Job over the new table: %s",
		dropTook.Round(time.Millisecond), len(before), lastLines(old.stderr(), 1), strings.TrimSpace(job.stdout()))
}
