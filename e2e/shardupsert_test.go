package e2e

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/harness/testenv"
	"github.com/stratadb/strata/table"
	"github.com/stratadb/strata/table/format"
)

// Four workers upsert overlapping keys — four hot keys in every upsert, the
// others spread over 40 — into one table on MinIO, each alternating
// between its own WAL shard (strata upsert --shard, acknowledged from the
// WAL, then merged) and direct commits, while the compactor Job compacts
// every second. At the end each key has one row, and it holds the value of
// the upsert of it installed last: the table's history (every version's
// transaction, read back) gives each acknowledged upsert the version that
// installed it — a direct upsert's commit, a shard's merge — and every
// worker's upserts of a key are installed in the order it made them.
func TestFourWorkersUpsertingThroughShardsAndDirectlyLeaveOneRowPerKeyTheLast(t *testing.T) {
	t.Parallel() // it waits on processes most of its time: it runs beside the others (not beside a test that stops MinIO)
	root := testenv.MinIO(t).URL(t)
	u := strings.Replace(root, "?", "/shardupserts?", 1)
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
		worker, round int
		keys          []int64
		reward        float64
	}
	var mu sync.Mutex
	var writes []write
	var failures []string
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 11))
			for r := range rounds {
				set := map[int64]bool{int64(r % 4): true}
				for range 3 {
					set[4+int64(rng.IntN(36))] = true
				}
				keys := slices.Sorted(func(yield func(int64) bool) {
					for k := range set {
						if !yield(k) {
							return
						}
					}
				})
				reward := float64(w*1000 + r)
				var lines strings.Builder
				for _, k := range keys {
					fmt.Fprintf(&lines, `{"id":%d,"reward":%g}`+"\n", k, reward)
				}
				file := filepath.Join(dir, fmt.Sprintf("w%d-%d.jsonl", w, r))
				if err := os.WriteFile(file, []byte(lines.String()), 0o644); err != nil {
					mu.Lock()
					failures = append(failures, err.Error())
					mu.Unlock()
					return
				}
				args := []string{"upsert", u, file, "--key", "id"}
				if r%2 == 0 {
					args = append(args, "--shard", fmt.Sprintf("worker-%d", w))
				}
				p := upsert(t, fmt.Sprintf("worker %d round %d", w, r), args[1:]...)
				mu.Lock()
				if p.cmd.ProcessState.ExitCode() != 0 || !strings.HasPrefix(p.stdout(), fmt.Sprintf("upserted %d rows", len(keys))) {
					failures = append(failures, fmt.Sprintf("worker %d round %d (%v): exit %d %q %s", w, r, args[5:], p.cmd.ProcessState.ExitCode(), p.stdout(), p.stderr()))
				} else {
					writes = append(writes, write{w, r, keys, reward})
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

	// Every version's transaction: which (key, reward) each upsert or
	// merge of upserts installed.
	b, err := blob.Open(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	latest, err := table.ReadLatest(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	installed := map[[2]float64]uint64{} // (key, reward) -> version
	merges := 0
	for v := uint64(1); v <= latest.Version; v++ {
		m, err := table.ReadManifest(ctx, b, v)
		if err != nil {
			t.Fatalf("v%d: %v", v, err)
		}
		txn := m.Transaction
		if len(txn.Keys) == 0 || (txn.Kind != format.KindUpsert && txn.Kind != format.KindMerge) {
			continue
		}
		if txn.Kind == format.KindMerge {
			merges++
		}
		for k, r := range keyRewards(t, b, m.Schema(), txn.Added) {
			installed[[2]float64{float64(k), r}] = v
		}
	}
	if merges == 0 {
		t.Fatal("no merge of a shard's upserts in the table's history")
	}
	want := map[int64]float64{}
	at := map[int64]uint64{}
	for _, w := range writes {
		for _, k := range w.keys {
			v, ok := installed[[2]float64{float64(k), w.reward}]
			if !ok {
				t.Fatalf("worker %d's upsert of key %d in round %d (reward %v) was acknowledged and never installed", w.worker, k, w.round, w.reward)
			}
			if v > at[k] {
				at[k], want[k] = v, w.reward
			}
		}
	}
	// A worker's upserts of a key are installed in the order it made them.
	for _, w := range writes {
		for _, w2 := range writes {
			if w.worker != w2.worker || w2.round <= w.round {
				continue
			}
			for _, k := range w.keys {
				if slices.Contains(w2.keys, k) && installed[[2]float64{float64(k), w2.reward}] <= installed[[2]float64{float64(k), w.reward}] {
					t.Fatalf("worker %d's upsert of key %d in round %d was installed at v%d, not after its round %d's (v%d)", w.worker, k, w2.round,
						installed[[2]float64{float64(k), w2.reward}], w.round, installed[[2]float64{float64(k), w.reward}])
				}
			}
		}
	}
	snap, err := table.Open(ctx, b, nil)
	if err != nil {
		t.Fatal(err)
	}
	rows := map[int64][]float64{}
	for rec, err := range snap.Scan(ctx, table.ScanOptions{Columns: []string{"id", "reward"}}) {
		if err != nil {
			t.Fatal(err)
		}
		ids, rs := rec.Column(0).(*array.Int64), rec.Column(1).(*array.Float64)
		for i := range int(rec.NumRows()) {
			rows[ids.Value(i)] = append(rows[ids.Value(i)], rs.Value(i))
		}
	}
	if len(rows) != len(want) {
		t.Fatalf("%d keys in the table, %d upserted", len(rows), len(want))
	}
	for k, r := range want {
		if len(rows[k]) != 1 || rows[k][0] != r {
			t.Fatalf("key %d holds %v; the upsert of it installed last (v%d) wrote %v", k, rows[k], at[k], r)
		}
	}
	t.Logf("%d upserts of %d keys by %d processes at once, half through shards (%d merges of upserts), the Job compacting: one row per key, each the one installed last, v%d",
		len(writes), len(want), workers, merges, latest.Version)
}

// keyRewards reads (id, reward) of the rows of frags.
func keyRewards(t *testing.T, b blob.Bucket, sc *arrow.Schema, frags []format.Fragment) map[int64]float64 {
	t.Helper()
	own := slices.Clone(frags)
	for i := range own {
		own[i].ID = uint64(i)
	}
	out := map[int64]float64{}
	for rec, err := range table.SnapshotOf(b, sc, own).Scan(ctx, table.ScanOptions{Columns: []string{"id", "reward"}}) {
		if err != nil {
			t.Fatal(err)
		}
		ids, rs := rec.Column(0).(*array.Int64), rec.Column(1).(*array.Float64)
		for i := range int(rec.NumRows()) {
			out[ids.Value(i)] = rs.Value(i)
		}
	}
	return out
}
