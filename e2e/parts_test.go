package e2e

import (
	"fmt"
	"net/http/httptest"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/commit"
	"github.com/stratadb/strata/compactor"
	"github.com/stratadb/strata/harness/latencyproxy"
	"github.com/stratadb/strata/harness/rollouts"
	"github.com/stratadb/strata/harness/testenv"
	"github.com/stratadb/strata/table"
	"github.com/stratadb/strata/table/format"
	"github.com/stratadb/strata/table/fragment"
)

// manyFragments creates a table at u of n fragments of rows rows each
// (ids 0 to n*rows-1), written 32 at once and committed a thousand at a
// time, and returns its version.
func manyFragments(t testing.TB, u string, n, rows int) uint64 {
	t.Helper()
	b, err := blob.Open(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if _, err := commit.Create(ctx, b, rollouts.Schema, nil, nil); err != nil {
		t.Fatal(err)
	}
	tb, err := commit.OpenTable(ctx, b, nil)
	if err != nil {
		t.Fatal(err)
	}
	var v uint64
	for from := 0; from < n; from += 1000 {
		frags := make([]format.Fragment, min(1000, n-from))
		errs := make([]error, len(frags))
		var wg sync.WaitGroup
		sem := make(chan struct{}, 32)
		for i := range frags {
			wg.Go(func() {
				sem <- struct{}{}
				defer func() { <-sem }()
				rec := rollouts.Batch(nil, 42, 0, int64((from+i)*rows), rows)
				defer rec.Release()
				frags[i], errs[i] = fragment.Write(ctx, b, rollouts.Schema, rec)
			})
		}
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
		res, err := tb.Commit(ctx, format.Transaction{Kind: format.KindAppend, CommitID: format.NewID(), Added: frags})
		if err != nil {
			t.Fatal(err)
		}
		v = res.Version
	}
	return v
}

// compactInParts runs parts strata-compactor processes, --part 0 to
// parts-1 of --parts, on an interval, until the table at u has nothing
// left to compact under the policy; it stops them and returns how long
// that took and each process's stderr.
func compactInParts(t testing.TB, u string, parts int, limit time.Duration, policy compactor.Policy, args ...string) (time.Duration, []string) {
	t.Helper()
	b, err := blob.Open(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	start := time.Now()
	var procs []*proc
	for i := range parts {
		a := append([]string{"--interval", "1s", "--table", u, "--no-gc", "--min-fragments", "2", "--holder", fmt.Sprintf("part-%d", i),
			"--parts", strconv.Itoa(parts), "--part", strconv.Itoa(i)}, args...)
		procs = append(procs, run(t, "strata-compactor", a...))
	}
	var took time.Duration
	for {
		m, err := table.ReadLatest(ctx, b)
		if err != nil {
			t.Fatal(err)
		}
		if len(compactor.PlanCompaction(m, policy).Bins) == 0 {
			took = time.Since(start)
			break
		}
		if time.Since(start) > limit {
			for _, p := range procs {
				p.signal(syscall.SIGKILL)
				<-p.done
				t.Logf("%s:\n%s", p.cmd.Args, lastLines(p.stderr(), 10))
			}
			t.Fatalf("%d parts: still %d fragments after %v", parts, len(m.Fragments), limit)
		}
		time.Sleep(200 * time.Millisecond)
	}
	var logs []string
	for _, p := range procs {
		p.signal(syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(time.Minute):
			p.signal(syscall.SIGKILL)
			<-p.done
		}
		logs = append(logs, p.stderr())
	}
	return took, logs
}

// Two Job processes, part 0 and part 1 of a split compaction, compact one
// table at once: each compacts bins of its own, and the table ends with
// every row once and nothing left to compact.
func TestCompactionSplitAmongJobProcesses(t *testing.T) {
	u := strings.Replace(testenv.MinIO(t).URL(t), "?", "/parts?", 1)
	const n, rows = 400, 10
	manyFragments(t, u, n, rows)
	policy := compactor.Policy{TargetRows: 200}
	took, logs := compactInParts(t, u, 2, 2*time.Minute, policy, "--target-rows", "200", "--max-source-fragments", "60")
	for i, log := range logs {
		if !strings.Contains(log, `"compacted":1`) {
			t.Fatalf("part %d never compacted:\n%s", i, lastLines(log, 20))
		}
		if i > 0 && strings.Contains(log, "generations_merged\":1") {
			t.Fatalf("part %d merged", i)
		}
	}
	seen := idsIn(t, u)
	for id := range int64(n * rows) {
		if seen[id] != 1 {
			t.Fatalf("id %d is in the table %d times", id, seen[id])
		}
	}
	if len(seen) != n*rows {
		t.Fatalf("%d ids in the table, want %d", len(seen), n*rows)
	}
	t.Logf("two parts compacted %d fragments in %v", n, took)
}

// Compaction of a table of STRATA_PARTS_FRAGMENTS (default 20,000)
// fragments of ten rows by 1, 2 and 4 Job processes, each a part of the
// split, through a 20 ms round trip to MinIO: the time until nothing is
// left to compact, and every row once. The table is built once and
// restored (nothing copied) before each count.
//
//	go test -run '^$' -bench CompactionByParts -benchtime 1x ./e2e
func BenchmarkCompactionByParts(b *testing.B) {
	n := 20_000
	if v, err := strconv.Atoi(os.Getenv("STRATA_PARTS_FRAGMENTS")); err == nil && v > 0 {
		n = v
	}
	const rows = 10
	minio := testenv.MinIO(b)
	direct := strings.Replace(minio.URL(b), "?", "/parts?", 1)
	built := manyFragments(b, direct, n, rows)
	p, err := latencyproxy.New(minio.Endpoint, 20*time.Millisecond, 5*time.Millisecond)
	if err != nil {
		b.Fatal(err)
	}
	front := httptest.NewServer(p)
	defer front.Close()
	u := strings.Replace(direct, "endpoint="+url.QueryEscape(minio.Endpoint), "endpoint="+url.QueryEscape(front.URL), 1)
	policy := compactor.Policy{TargetRows: 2000}
	for b.Loop() {
		for _, parts := range []int{1, 2, 4} {
			restore(b, direct, built)
			took, _ := compactInParts(b, u, parts, 20*time.Minute, policy, "--target-rows", "2000")
			seen := idsIn(b, direct)
			if len(seen) != n*rows {
				b.Fatalf("%d parts: %d ids, want %d", parts, len(seen), n*rows)
			}
			for id, c := range seen {
				if c != 1 {
					b.Fatalf("%d parts: id %d is in the table %d times", parts, id, c)
				}
			}
			b.ReportMetric(took.Seconds(), fmt.Sprintf("s/%d-parts", parts))
			b.Logf("%d fragments compacted by %d parts in %v", n, parts, took)
		}
	}
}

// restore commits a version of the table at u whose rows are version v's.
func restore(t testing.TB, u string, v uint64) {
	t.Helper()
	bk, err := blob.Open(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	defer bk.Close()
	tb, err := commit.OpenTable(ctx, bk, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tb.Restore(ctx, v); err != nil {
		t.Fatal(err)
	}
}
