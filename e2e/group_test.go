package e2e

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/harness/testenv"
	"github.com/stratadb/strata/table"
)

// groupUnit names a unit of change as a group's sink keys it.
type groupUnit struct {
	version, unit uint64
	change        string
}

// memberSink reads a member's JSON lines as a sink that commits at each
// marker would: the units printed before the run's last marker (a member
// killed after printing part of a run had not committed it).
func memberSink(t *testing.T, out string, into map[groupUnit]map[int64]int) (again int) {
	t.Helper()
	run := map[groupUnit]map[int64]int{}
	for line := range strings.Lines(out) {
		var row struct {
			ID      *int64 `json:"id"`
			Change  string `json:"_change"`
			Version uint64 `json:"_version"`
			Unit    uint64 `json:"_unit"`
		}
		if err := json.Unmarshal([]byte(line), &row); err != nil {
			t.Fatalf("a member printed %q: %v", line, err)
		}
		if row.Change == "through" {
			for k, ids := range run {
				if have, ok := into[k]; ok {
					again++
					if !maps.Equal(have, ids) {
						t.Fatalf("unit %+v printed again with other rows: %v, then %v", k, have, ids)
					}
					continue
				}
				into[k] = ids
			}
			run = map[groupUnit]map[int64]int{}
			continue
		}
		k := groupUnit{row.Version, row.Unit, row.Change}
		if run[k] == nil {
			run[k] = map[int64]int{}
		}
		run[k][*row.ID]++
	}
	return again
}

// A consumer group of three `strata follow --group` members follows a
// table on MinIO while four workers append through their shards, a writer
// upserts, and the Job merges, compacts and collects; one member is
// killed with SIGKILL and started again, another stopped with SIGSTOP for
// longer than its lease. Every acknowledged row reaches the group's sink
// (the members' output, keyed by _version and _unit) once: replayed in
// version order, the units give the table's rows. The positions survive
// the restart (the restarted member does not print the history again),
// and garbage collection removed nothing a member had not read (no member
// failed).
func TestConsumerGroupSplitsAFollowedTableExactlyOnce(t *testing.T) {
	t.Parallel() // it waits on processes most of its time: it runs beside the others (not beside a test that stops MinIO)
	minio := testenv.MinIO(t)
	root := minio.URL(t)
	u := strings.Replace(root, "?", "/rollouts?", 1)
	var workers []*proc
	for w := range 4 {
		workers = append(workers, run(t, "strata", workerArgs(u, w)...))
	}
	waitForTable(t, u)
	job := run(t, "strata-compactor", "--interval", "500ms", "--table", u, "--min-fragments", "4", "--keep-versions", "3", "--retain", "5m", "--safety-age", "5m")
	member := func(name string) *proc {
		return run(t, "strata", "follow", u, "--group", "learners", "--member", name, "--lease", "2s", "--poll", "100ms")
	}
	members := map[string][]*proc{}
	for _, name := range []string{"m0", "m1", "m2"} {
		members[name] = append(members[name], member(name))
	}
	// The writer: five keys of its own, upserted round after round.
	dir := t.TempDir()
	upserts := 0
	upsert := func(round int) {
		var sb strings.Builder
		for k := range 5 {
			fmt.Fprintf(&sb, `{"id":%d,"worker":"up","step":%d,"ts":"2026-12-07T10:00:00Z","reward":%d.5,"prompt":"p","artifact":""}`+"\n", 9*1_000_000_000+k, round, round)
		}
		file := filepath.Join(dir, fmt.Sprintf("up%d.jsonl", round))
		if err := os.WriteFile(file, []byte(sb.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		p := run(t, "strata", "upsert", u, file, "--key", "id")
		p.wait(t, time.Minute)
		if p.cmd.ProcessState.ExitCode() != 0 {
			t.Fatalf("upsert round %d: %s", round, p.stderr())
		}
		upserts++
	}
	for round := range 12 {
		upsert(round)
		switch round {
		case 3: // m1 dies, and is started again a second later
			members["m1"][0].signal(syscall.SIGKILL)
			members["m1"][0].wait(t, time.Minute)
		case 5:
			members["m1"] = append(members["m1"], member("m1"))
		case 6: // m2 stops for twice its lease
			members["m2"][0].signal(syscall.SIGSTOP)
		case 10:
			members["m2"][0].signal(syscall.SIGCONT)
		}
		time.Sleep(500 * time.Millisecond)
	}
	var ackedRows []int64
	for _, p := range workers {
		p.signal(syscall.SIGTERM) // flushes and merges
		p.wait(t, time.Minute)
		if code := p.cmd.ProcessState.ExitCode(); code != 0 {
			t.Fatalf("worker: exit %d\n%s", code, p.stderr())
		}
		ackedRows = append(ackedRows, acked(p.stdout())...)
	}
	time.Sleep(time.Second) // a last pass of the Job
	job.signal(syscall.SIGTERM)
	job.wait(t, time.Minute)
	if code := job.cmd.ProcessState.ExitCode(); code != 0 || !strings.Contains(job.stderr(), `"msg":"compacted"`) {
		t.Fatalf("the Job: exit %d, compacted nothing?\n%s", code, lastLines(job.stderr(), 10))
	}
	b, err := blob.Open(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	latest, err := table.LatestVersion(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, time.Minute, "the group to read through the latest version", func() bool {
		g, err := table.ReadGroup(ctx, b, "learners")
		return err == nil && g.Slowest() >= latest
	})
	sink := map[groupUnit]map[int64]int{}
	again := 0
	for name, runs := range members {
		for i, p := range runs {
			if i == len(runs)-1 {
				p.signal(syscall.SIGTERM)
				p.wait(t, time.Minute)
				if code := p.cmd.ProcessState.ExitCode(); code != 0 {
					t.Fatalf("member %s: exit %d\n%s", name, code, p.stderr())
				}
			}
			again += memberSink(t, p.stdout(), sink)
		}
	}
	// Replayed by unit in version order, deletes first, the sink gives
	// the table: each acknowledged row once, the upserted keys once.
	ids := map[int64]int{}
	for v := uint64(1); v <= latest; v++ {
		for _, change := range []string{"delete", "insert"} {
			for k, rows := range sink {
				if k.version != v || k.change != change {
					continue
				}
				for id, n := range rows {
					if change == "insert" {
						ids[id] += n
					} else if ids[id] -= n; ids[id] == 0 {
						delete(ids, id)
					}
				}
			}
		}
	}
	if want := idsIn(t, u); !maps.Equal(ids, want) {
		t.Fatalf("the group's sink replays to %d rows, the table holds %d", len(ids), len(want))
	}
	for _, id := range ackedRows {
		if ids[id] != 1 {
			t.Fatalf("acknowledged id %d reached the sink %d times", id, ids[id])
		}
	}
	// The member started again went on from the group's positions: it
	// printed none of the versions before its restart's first run again.
	restarted := members["m1"][1].stdout()
	if strings.Contains(restarted, `"_version":2,`) {
		t.Error("the restarted member printed the table's first changes again")
	}
	t.Logf("%d acknowledged rows and %d upserts through a group of 3 (one killed, one stopped past its lease): %d units, %d printed again; %d versions",
		len(ackedRows), upserts, len(sink), again, latest)
}
