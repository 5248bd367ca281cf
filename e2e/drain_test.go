package e2e

import (
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stratadb/strata/harness/testenv"
)

// A fleet worker whose generations pile up with no Job to merge them (64
// await merging: its flushes wait for room) ends within --drain-timeout
// of a SIGTERM, saying it left the rest in its WAL; the compactor Job
// then adopts the shard and every row the worker acknowledged is in the
// table once. Before, the drain waited on that flush, 20 s to minutes.
// The bound is a liveness bound: the test allows 20 s past it.
func TestAWorkerWithNoRoomToFlushEndsWithinItsDrainTimeout(t *testing.T) {
	minio := testenv.MinIO(t)
	u := strings.Replace(minio.URL(t), "?", "/rollouts?", 1)
	const drain = 3 * time.Second
	w := run(t, "strata", "worker", u, "--worker", "1", "--rows", "20", "--every", "10ms",
		"--flush-interval", "20ms", "--merge-interval", "0", "--drain-timeout", drain.String())
	waitForTable(t, u)
	// 64 generations await merging (no merge runs): flushes wait for
	// room, and acknowledged rows gather in the memtable and the WAL.
	testenv.Eventually(t, 2*time.Minute, "64 flushed generations", func() bool {
		return len(minio.Keys(t, u, "_fleet/flush/")) >= 64
	})
	before := len(acked(w.stdout()))
	testenv.Eventually(t, time.Minute, "appends after the flushes stopped", func() bool {
		return len(acked(w.stdout())) >= before+200
	})
	start := time.Now()
	w.signal(syscall.SIGTERM)
	w.wait(t, drain+20*time.Second)
	took := time.Since(start)
	if code := w.cmd.ProcessState.ExitCode(); code != 0 || !strings.Contains(w.stderr(), "drain not done within --drain-timeout") {
		t.Fatalf("the worker after a SIGTERM: exit %d after %s\n%s", code, took, lastLines(w.stderr(), 5))
	}
	all := acked(w.stdout())
	// Quiet longer than the adoption age by the store's clock (whole
	// seconds on S3); a pass merges 64 generations of a shard at most.
	time.Sleep(2500 * time.Millisecond)
	var passes []string
	for len(passes) < 4 {
		job := run(t, "strata-compactor", "--once", "--table", u, "--adopt-after", "1s", "--no-gc")
		job.wait(t, time.Minute)
		if code := job.cmd.ProcessState.ExitCode(); code != 0 {
			t.Fatalf("compactor: exit %d\n%s\n%s", code, job.stdout(), lastLines(job.stderr(), 5))
		}
		passes = append(passes, strings.TrimSpace(job.stdout()))
		if seen := idsIn(t, u); len(seen) >= len(all) {
			break
		}
	}
	n := checkOnce(t, u, all)
	t.Logf("the worker exited %s after the SIGTERM (--drain-timeout %s), having acknowledged %d rows; the table holds %d after %d Job passes:\n%s",
		took.Round(time.Millisecond), drain, len(all), n, len(passes), strings.Join(passes, "\n"))
}
