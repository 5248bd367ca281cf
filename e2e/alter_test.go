package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stratadb/strata/harness/testenv"
)

// Four processes at a time append rows written for the first schema
// (id, reward) to a table on MinIO while a column is added and reward is
// renamed to score, the compactor Job compacting every second: every
// acknowledged row is in the table once, its reward under score, and the
// added column null in every row.
func TestFourWorkersAppendWithTheOldSchemaWhileColumnsChange(t *testing.T) {
	t.Parallel() // it waits on processes most of its time: it runs beside the others (not beside a test that stops MinIO)
	root := testenv.MinIO(t).URL(t)
	u := strings.Replace(root, "?", "/evolving?", 1)
	dir := t.TempDir()
	schema := filepath.Join(dir, "schema.json")
	if err := os.WriteFile(schema, []byte(`{"fields":[{"name":"id","type":"int64"},{"name":"reward","type":"float32"}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	c := run(t, "strata", "create", u, "--schema", schema)
	c.wait(t, time.Minute)
	if c.cmd.ProcessState.ExitCode() != 0 {
		t.Fatalf("create: %s", c.stderr())
	}
	job := run(t, "strata-compactor", "--interval", "1s", "--table", u, "--min-fragments", "3")

	const workers, rounds, per = 4, 10, 5
	var mu sync.Mutex
	acked := map[int64]float64{}
	var failures []string
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := range rounds {
				var lines strings.Builder
				want := map[int64]float64{}
				for i := range per {
					id := int64(w*10000 + r*100 + i)
					want[id] = float64(r) + 0.5
					fmt.Fprintf(&lines, `{"id":%d,"reward":%g}`+"\n", id, want[id])
				}
				file := filepath.Join(dir, fmt.Sprintf("w%d-%d.jsonl", w, r))
				if err := os.WriteFile(file, []byte(lines.String()), 0o644); err != nil {
					t.Error(err)
					return
				}
				p := run(t, "strata", "append", u, file)
				<-p.done
				mu.Lock()
				if p.cmd.ProcessState.ExitCode() != 0 {
					failures = append(failures, fmt.Sprintf("worker %d round %d: %s", w, r, p.stderr()))
				} else {
					for id, v := range want {
						acked[id] = v
					}
				}
				mu.Unlock()
			}
		}()
	}
	alter := func(args ...string) {
		a := run(t, "strata", append([]string{"alter", u}, args...)...)
		a.wait(t, time.Minute)
		if a.cmd.ProcessState.ExitCode() != 0 {
			t.Errorf("alter %v: %s", args, a.stderr())
		}
		t.Logf("%s", strings.TrimSpace(a.stdout()))
	}
	time.Sleep(2 * time.Second)
	alter("--add-column", "grade:string")
	time.Sleep(2 * time.Second)
	alter("--rename-column", "reward:score", "--widen-column", "score:float64")
	wg.Wait()
	job.signal(syscall.SIGTERM)
	job.wait(t, time.Minute)
	if len(failures) > 0 {
		t.Fatalf("%d appends failed:\n%s", len(failures), strings.Join(failures, "\n"))
	}
	s := run(t, "strata", "scan", u, "--format", "jsonl")
	s.wait(t, time.Minute)
	rows := map[int64][]float64{}
	for l := range strings.Lines(s.stdout()) {
		var x map[string]any
		if err := json.Unmarshal([]byte(l), &x); err != nil {
			t.Fatalf("scan printed %q: %v", l, err)
		}
		if _, old := x["reward"]; old || x["grade"] != nil {
			t.Fatalf("row %q: want score and a null grade", l)
		}
		id, score := int64(x["id"].(float64)), x["score"].(float64)
		rows[id] = append(rows[id], score)
	}
	if len(rows) != len(acked) {
		t.Fatalf("%d rows in the table, %d acknowledged", len(rows), len(acked))
	}
	for id, v := range acked {
		if len(rows[id]) != 1 || rows[id][0] != v {
			t.Fatalf("row %d holds %v, acknowledged %v", id, rows[id], v)
		}
	}
	t.Logf("%d rows appended by %d processes under the first schema while a column was added and one renamed and widened, the Job compacting: every row once, under the new names", len(acked), workers)
}
