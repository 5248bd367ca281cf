package e2e

import (
	"encoding/json"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stratadb/strata/harness/testenv"
)

// followed is what a sink keyed by _version took from the output of the
// follower's runs: a version's rows count once, from the first run that
// printed them whole (its through marker after them); a version printed
// again by a later run, the follower having been killed before it recorded
// its position, is not taken twice.
type followed struct {
	taken             map[uint64]bool
	inserts, deletes  map[int64]int
	through, repeated uint64
}

func (f *followed) take(t *testing.T, out string) {
	t.Helper()
	type line struct {
		Change  string `json:"_change"`
		Version uint64 `json:"_version"`
		ID      int64  `json:"id"`
	}
	var pending []line
	for l := range strings.Lines(out) {
		var x line
		if err := json.Unmarshal([]byte(l), &x); err != nil {
			t.Fatalf("the follower printed %q: %v", l, err)
		}
		if x.Change != "through" {
			pending = append(pending, x)
			continue
		}
		for _, p := range pending {
			switch {
			case p.Version > x.Version:
				t.Fatalf("a change of v%d before the marker through v%d", p.Version, x.Version)
			case f.taken[p.Version]:
				f.repeated++
				continue
			case p.Change == "insert":
				f.inserts[p.ID]++
			case p.Change == "delete":
				f.deletes[p.ID]++
			default:
				t.Fatalf("change %q", p.Change)
			}
		}
		for _, p := range pending {
			f.taken[p.Version] = true
		}
		pending = nil
		f.through = max(f.through, x.Version)
	}
}

// A follower consuming a table as a named consumer while four workers
// write through shards, the compactor Job merges, compacts and collects
// every second, and rows are deleted, is killed with SIGKILL and started
// again twice: every row that reached the table is delivered as an insert
// once, every delete as a delete once, and no row a compaction moved is
// delivered again.
func TestAFollowerKilledTwiceDeliversEveryChangeOnce(t *testing.T) {
	t.Parallel() // it waits on processes most of its time: it runs beside the others (not beside a test that stops MinIO)
	root := testenv.MinIO(t).URL(t)
	u := strings.Replace(root, "?", "/rollouts?", 1)
	var workers []*proc
	for w := range 4 {
		workers = append(workers, run(t, "strata", workerArgs(u, w)...))
	}
	waitForTable(t, u)
	job := run(t, "strata-compactor", "--interval", "1s", "--table", u, "--min-fragments", "4")
	follow := func() *proc {
		return run(t, "strata", "follow", u, "--consumer", "trainer", "--from", "0", "--poll", "100ms", "--columns", "id")
	}
	f := &followed{taken: map[uint64]bool{}, inserts: map[int64]int{}, deletes: map[int64]int{}}
	deleted := 0
	for round := range 3 {
		p := follow()
		time.Sleep(2 * time.Second)
		// Delete a row that is in the table now.
		for id := range idsIn(t, u) {
			d := run(t, "strata", "delete", u, "--filter", fmt.Sprintf("id = %d", id))
			d.wait(t, time.Minute)
			if d.cmd.ProcessState.ExitCode() != 0 || !strings.Contains(d.stdout(), "deleted 1 rows") {
				t.Fatalf("delete of id %d: %s%s", id, d.stdout(), d.stderr())
			}
			deleted++
			break
		}
		time.Sleep(time.Second)
		if round < 2 {
			p.signal(syscall.SIGKILL)
		} else {
			p.signal(syscall.SIGTERM)
		}
		p.wait(t, time.Minute)
		f.take(t, p.stdout())
	}
	for _, p := range workers {
		p.signal(syscall.SIGTERM) // a worker leaving normally flushes and merges
		p.wait(t, time.Minute)
	}
	job.signal(syscall.SIGTERM)
	job.wait(t, time.Minute)
	if !strings.Contains(job.stderr(), `"msg":"compacted"`) {
		t.Fatalf("the Job never compacted:\n%s", lastLines(job.stderr(), 10))
	}
	// The last run catches up with every version and exits.
	last := run(t, "strata", "follow", u, "--consumer", "trainer", "--columns", "id", "--exit-when-idle")
	last.wait(t, time.Minute)
	if code := last.cmd.ProcessState.ExitCode(); code != 0 {
		t.Fatalf("the last follow: exit %d\n%s", code, last.stderr())
	}
	f.take(t, last.stdout())

	final := idsIn(t, u)
	for id, n := range f.inserts {
		if n != 1 {
			t.Fatalf("id %d was delivered as an insert %d times", id, n)
		}
	}
	for id, n := range f.deletes {
		if n != 1 || f.inserts[id] != 1 || final[id] != 0 {
			t.Fatalf("id %d: delivered as a delete %d times, as an insert %d times; in the table %d times", id, n, f.inserts[id], final[id])
		}
	}
	for id, n := range final {
		if n != 1 || f.inserts[id] != 1 || f.deletes[id] != 0 {
			t.Fatalf("id %d is in the table %d times; delivered as an insert %d times, as a delete %d times", id, n, f.inserts[id], f.deletes[id])
		}
	}
	if len(f.deletes) != deleted || len(f.inserts) != len(final)+deleted {
		t.Fatalf("%d deletes delivered of %d made; %d inserts for %d rows in the table", len(f.deletes), deleted, len(f.inserts), len(final))
	}
	var acknowledged int
	for _, p := range workers {
		for _, id := range acked(p.stdout()) {
			acknowledged++
			if f.inserts[id] != 1 {
				t.Fatalf("acknowledged id %d was delivered %d times", id, f.inserts[id])
			}
		}
	}
	t.Logf("through v%d: %d rows acknowledged, %d inserts and %d deletes delivered once each across two SIGKILLs; %d rows printed again after a kill and not taken twice",
		f.through, acknowledged, len(f.inserts), len(f.deletes), f.repeated)
}
