package e2e

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stratadb/strata/harness/testenv"
)

// Four processes at a time upsert overlapping keys — four hot keys in
// every upsert, the others spread over 40 — into one table on MinIO
// while the compactor Job compacts every second: at the end each key has
// one row, holding the value of the upsert of it that committed last (the
// highest version among the acknowledged ones).
func TestFourWorkersUpsertingOverlappingKeysLeaveOneRowPerKeyTheLast(t *testing.T) {
	t.Parallel() // it waits on processes most of its time: it runs beside the others (not beside a test that stops MinIO)
	root := testenv.MinIO(t).URL(t)
	u := strings.Replace(root, "?", "/upserts?", 1)
	dir := t.TempDir()
	schema := filepath.Join(dir, "schema.json")
	if err := os.WriteFile(schema, []byte(`{"fields":[{"name":"id","type":"int64"},{"name":"reward","type":"float64","nullable":true}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	c := run(t, "strata", "create", u, "--schema", schema)
	c.wait(t, time.Minute)
	if c.cmd.ProcessState.ExitCode() != 0 {
		t.Fatalf("create: %s", c.stderr())
	}
	job := run(t, "strata-compactor", "--interval", "1s", "--table", u, "--min-fragments", "3")

	const workers, rounds = 4, 12
	type write struct {
		version uint64
		reward  float64
	}
	var mu sync.Mutex
	last := map[int64]write{}
	var failures []string
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			for r := range rounds {
				keys := map[int64]bool{int64(r % 4): true}
				for range 3 {
					keys[4+int64(rng.IntN(36))] = true
				}
				reward := float64(w*1000 + r)
				var lines strings.Builder
				for k := range keys {
					fmt.Fprintf(&lines, `{"id":%d,"reward":%g}`+"\n", k, reward)
				}
				file := filepath.Join(dir, fmt.Sprintf("w%d-%d.jsonl", w, r))
				if err := os.WriteFile(file, []byte(lines.String()), 0o644); err != nil {
					mu.Lock()
					failures = append(failures, err.Error())
					mu.Unlock()
					return
				}
				p := upsert(t, fmt.Sprintf("worker %d round %d", w, r), u, file, "--key", "id")
				var rows, replaced int
				var version uint64
				_, err := fmt.Sscanf(p.stdout(), "upserted %d rows, replacing %d (version %d)", &rows, &replaced, &version)
				mu.Lock()
				if err != nil || p.cmd.ProcessState.ExitCode() != 0 || rows != len(keys) {
					failures = append(failures, fmt.Sprintf("worker %d round %d: exit %d %q %s", w, r, p.cmd.ProcessState.ExitCode(), p.stdout(), p.stderr()))
				}
				for k := range keys {
					if cur, ok := last[k]; !ok || version > cur.version {
						last[k] = write{version, reward}
					}
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	job.signal(syscall.SIGTERM)
	job.wait(t, time.Minute)
	if len(failures) > 0 {
		t.Fatalf("%d upserts failed:\n%s", len(failures), strings.Join(failures, "\n"))
	}
	if !strings.Contains(job.stderr(), `"msg":"compacted"`) {
		t.Fatalf("the Job never compacted:\n%s", lastLines(job.stderr(), 10))
	}
	s := run(t, "strata", "scan", u, "--format", "jsonl")
	s.wait(t, time.Minute)
	rows := map[int64][]float64{}
	for l := range strings.Lines(s.stdout()) {
		var x struct {
			ID     int64   `json:"id"`
			Reward float64 `json:"reward"`
		}
		if err := json.Unmarshal([]byte(l), &x); err != nil {
			t.Fatalf("scan printed %q: %v", l, err)
		}
		rows[x.ID] = append(rows[x.ID], x.Reward)
	}
	if len(rows) != len(last) {
		t.Fatalf("%d keys in the table, %d upserted", len(rows), len(last))
	}
	for k, w := range last {
		if len(rows[k]) != 1 || rows[k][0] != w.reward {
			t.Fatalf("key %d holds %v; the last acknowledged upsert of it (v%d) wrote %v", k, rows[k], w.version, w.reward)
		}
	}
	t.Logf("%d upserts of %d keys by %d processes at once, the Job compacting: one row per key, each the last upsert's", workers*rounds, len(last), workers)
}

// upsert runs strata upsert with args, and sends it again (at most four
// times) while it answers that its plans all lost to other writers
// ("nothing was upserted", exit 1), as a worker would. Once the Job has
// compacted the workers' fragments, every pair of upserts replaces rows
// of one fragment and conflicts, and a worker the machine starves can lose
// every one of its plans; the promises under test hold either way.
func upsert(t *testing.T, who string, args ...string) *proc {
	for attempt := 0; ; attempt++ {
		p := run(t, "strata", append([]string{"upsert"}, args...)...)
		<-p.done
		if attempt == 4 || p.cmd.ProcessState.ExitCode() != 1 ||
			!strings.Contains(p.stderr(), "conflicts with") || !strings.Contains(p.stderr(), "nothing was upserted") {
			return p
		}
		t.Logf("%s: sent again after %s", who, strings.TrimSpace(p.stderr()))
	}
}
