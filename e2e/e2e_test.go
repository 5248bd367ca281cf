// Package e2e runs the real binaries — strata workers, strata serve and
// strata-compactor — as processes against a real MinIO, with and without
// faults, and checks that every acknowledged row is in the table once.
package e2e

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/client"
	"github.com/stratadb/strata/harness/testenv"
	"github.com/stratadb/strata/table"
	"github.com/stratadb/strata/table/format"
)

var bins string // folder holding the built binaries

// binsEnv names a folder holding the binaries already built (the test
// command builds them once for these tests and the Python client's).
const binsEnv = "STRATA_E2E_BINS"

var commands = []string{"strata", "strata-engine", "strata-full", "strata-compactor", "strata-iceberg", "strata-sim"}

func TestMain(m *testing.M) {
	os.Exit(func() int {
		if dir := os.Getenv(binsEnv); dir != "" {
			for _, c := range commands {
				if _, err := os.Stat(filepath.Join(dir, c)); err != nil {
					fmt.Fprintf(os.Stderr, "%s=%s: %v\n", binsEnv, dir, err)
					return 1
				}
			}
			bins = dir
			return testenv.Main(m)
		}
		dir, err := os.MkdirTemp("", "strata-e2e-bin-")
		if err != nil {
			panic(err)
		}
		defer os.RemoveAll(dir)
		root, err := testenv.RepoRoot()
		if err != nil {
			panic(err)
		}
		for _, c := range commands {
			// -buildvcs=true: the binaries carry the checkout's revision,
			// as a release build does, whatever GOFLAGS says.
			cmd := exec.Command("go", "build", "-buildvcs=true", "-o", filepath.Join(dir, c), "./cmd/"+c)
			cmd.Dir, cmd.Stderr = root, os.Stderr
			if err := cmd.Run(); err != nil {
				fmt.Fprintln(os.Stderr, "building", c, err)
				return 1
			}
		}
		bins = dir
		return testenv.Main(m)
	}())
}

var ctx = context.Background()

// proc is a running binary whose stdout is collected.
type proc struct {
	name string
	cmd  *exec.Cmd
	mu   sync.Mutex
	out  strings.Builder
	err  strings.Builder
	done chan struct{}
}

func run(t testing.TB, name string, args ...string) *proc {
	t.Helper()
	return start(t, name, exec.Command(filepath.Join(bins, name), args...))
}

func start(t testing.TB, name string, cmd *exec.Cmd) *proc {
	t.Helper()
	p := &proc{name: name, cmd: cmd, done: make(chan struct{})}
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	p.cmd.Stderr = &lockedBuilder{mu: &p.mu, b: &p.err}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(p.done)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			p.mu.Lock()
			p.out.WriteString(sc.Text() + "\n")
			p.mu.Unlock()
		}
		_, _ = io.Copy(io.Discard, stdout)
		_ = p.cmd.Wait()
	}()
	// No process outlives its test: one the test left running (a server
	// it needed to the end) is killed, and waited for, when it ends.
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			_ = p.cmd.Process.Kill()
			<-p.done
		}
	})
	return p
}

type lockedBuilder struct {
	mu *sync.Mutex
	b  *strings.Builder
}

func (l *lockedBuilder) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (p *proc) signal(sig syscall.Signal) { _ = p.cmd.Process.Signal(sig) }

func (p *proc) wait(t *testing.T, d time.Duration) {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(d):
		p.signal(syscall.SIGKILL)
		<-p.done
		t.Fatalf("%s did not exit within %s\n%s", p.name, d, p.stderr())
	}
}

func (p *proc) stdout() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.String()
}

func (p *proc) stderr() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err.String()
}

// acked parses a worker's "ack FIRST COUNT" lines into ids.
func acked(out string) []int64 {
	var ids []int64
	for line := range strings.Lines(out) {
		var first, n int64
		if _, err := fmt.Sscanf(line, "ack %d %d", &first, &n); err == nil {
			for i := range n {
				ids = append(ids, first+i)
			}
		}
	}
	return ids
}

// idsIn counts each id in a plain scan of the table's latest version.
func idsIn(t testing.TB, u string) map[int64]int {
	t.Helper()
	b, err := blob.Open(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	s, err := table.Open(ctx, b, nil)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int64]int{}
	for rec, err := range s.Scan(ctx, table.ScanOptions{Columns: []string{"id"}}) {
		if err != nil {
			t.Fatal(err)
		}
		for _, id := range rec.Column(0).(*array.Int64).Int64Values() {
			seen[id]++
		}
	}
	return seen
}

// checkOnce asserts that the table holds every id in want exactly once,
// and nothing that was not at least tried.
func checkOnce(t *testing.T, u string, want []int64) int {
	t.Helper()
	seen := idsIn(t, u)
	for _, id := range want {
		if seen[id] != 1 {
			t.Fatalf("acknowledged id %d is in the table %d times", id, seen[id])
		}
	}
	for id, n := range seen {
		if n != 1 {
			t.Fatalf("id %d is in the table %d times", id, n)
		}
	}
	return len(seen)
}

func workerArgs(u string, w int, extra ...string) []string {
	return append([]string{"worker", u, "--worker", fmt.Sprint(w), "--rows", "20", "--every", "10ms",
		"--flush-interval", "200ms", "--merge-interval", "300ms"}, extra...)
}

// Four worker processes, the compactor Job on an interval, and the server,
// for a bounded time; then every acknowledged row is in the table once.
func TestFleet(t *testing.T) {
	minio := testenv.MinIO(t)
	root := minio.URL(t)
	u := strings.Replace(root, "?", "/rollouts?", 1) // table "rollouts" under root
	var workers []*proc
	for w := range 4 {
		workers = append(workers, run(t, "strata", workerArgs(u, w)...))
	}
	waitForTable(t, u) // a worker makes it
	compactor := run(t, "strata-compactor", "--interval", "400ms", "--table", u, "--min-fragments", "4", "--no-gc")
	srv := run(t, "strata", "serve", "--bucket", root, "--listen", "127.0.0.1:0", "--instance", "e2e")
	time.Sleep(3 * time.Second)
	var all []int64
	for _, p := range workers {
		p.signal(syscall.SIGTERM) // a worker leaving normally flushes and merges
		p.wait(t, time.Minute)
		if code := p.cmd.ProcessState.ExitCode(); code != 0 {
			t.Fatalf("worker: exit %d\n%s", code, p.stderr())
		}
		all = append(all, acked(p.stdout())...)
	}
	compactor.signal(syscall.SIGTERM)
	compactor.wait(t, time.Minute)
	if code := compactor.cmd.ProcessState.ExitCode(); code != 0 {
		t.Fatalf("compactor: exit %d\n%s", code, lastLines(compactor.stderr(), 5))
	}
	// The Job did its work: it compacted at least once, and merged the
	// shards' generations.
	if !regexp.MustCompile(`"msg":"compacted".*"version":[1-9]`).MatchString(compactor.stderr()) || !strings.Contains(compactor.stderr(), `"msg":"merged"`) {
		t.Fatalf("the compactor neither compacted nor fleet-merged:\n%s", lastLines(compactor.stderr(), 10))
	}
	// The server sees the same table: a checkpoint through it, then its
	// description of the table.
	var addr string
	for _, line := range strings.Split(srv.stdout(), "\n") {
		if _, rest, ok := strings.Cut(line, "listening on "); ok {
			addr, _, _ = strings.Cut(rest, ",")
		}
	}
	if addr == "" {
		t.Fatalf("the server did not start:\n%s", srv.stderr())
	}
	c, err := client.New(addr, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.CheckpointLSM(ctx, "rollouts"); err != nil {
		t.Fatalf("checkpoint through the server: %v", err)
	}
	info, err := c.Describe(ctx, "rollouts")
	if err != nil {
		t.Fatal(err)
	}
	srv.signal(syscall.SIGTERM)
	srv.wait(t, time.Minute)
	if code := srv.cmd.ProcessState.ExitCode(); code != 0 {
		t.Fatalf("server: exit %d\n%s", code, lastLines(srv.stderr(), 5))
	}
	n := checkOnce(t, u, all)
	if info.Rows != int64(n) {
		t.Fatalf("the server describes %d rows, the table holds %d", info.Rows, n)
	}
	t.Logf("fleet: 4 workers acknowledged %d rows; the table holds %d rows, each once; compactor log:\n%s", len(all), n, lastLines(compactor.stderr(), 2))
	if len(all) == 0 {
		t.Fatal("no rows were acknowledged")
	}
}

// The same with faults: workers and the compactor killed with SIGKILL at
// random moments and restarted, and MinIO stopped and restarted mid-run.
func TestFleetWithKillsAndAStoreOutage(t *testing.T) {
	minio := testenv.MinIO(t)
	u := strings.Replace(minio.URL(t), "?", "/rollouts?", 1)
	seed := uint64(time.Now().UnixNano())
	rng := rand.New(rand.NewPCG(seed, 3))
	t.Logf("seed %d", seed)
	var all []int64
	kills, restarts := 0, 0
	workers := make([]*proc, 4)
	for w := range workers {
		workers[w] = run(t, "strata", workerArgs(u, w)...)
	}
	waitForTable(t, u)
	compactor := run(t, "strata-compactor", "--interval", "300ms", "--table", u, "--min-fragments", "4", "--no-gc")
	collect := func(w int) {
		all = append(all, acked(workers[w].stdout())...)
	}
	deadline := time.Now().Add(6 * time.Second)
	outage := time.Now().Add(2500 * time.Millisecond)
	for time.Now().Before(deadline) {
		time.Sleep(time.Duration(100+rng.IntN(300)) * time.Millisecond)
		if !outage.IsZero() && time.Now().After(outage) {
			minio.Stop()
			time.Sleep(700 * time.Millisecond)
			if err := minio.Restart(); err != nil {
				t.Fatal(err)
			}
			outage = time.Time{}
			restarts++
			t.Logf("MinIO stopped and restarted")
		}
		w := rng.IntN(len(workers) + 1)
		if w == len(workers) { // the compactor
			compactor.signal(syscall.SIGKILL)
			<-compactor.done
			compactor = run(t, "strata-compactor", "--interval", "300ms", "--table", u, "--min-fragments", "4", "--no-gc")
			kills++
			continue
		}
		workers[w].signal(syscall.SIGKILL)
		<-workers[w].done
		collect(w)
		kills++
		workers[w] = run(t, "strata", workerArgs(u, w)...)
		restarts++
		// Workers that died of the outage are restarted too.
		for i, p := range workers {
			select {
			case <-p.done:
				collect(i)
				workers[i] = run(t, "strata", workerArgs(u, i)...)
				restarts++
			default:
			}
		}
	}
	for w, p := range workers {
		p.signal(syscall.SIGKILL)
		<-p.done
		collect(w)
	}
	compactor.signal(syscall.SIGKILL)
	<-compactor.done
	// A last run of each worker replays what its killed self left in the
	// WAL, appends once more, flushes and merges.
	for w := range workers {
		p := run(t, "strata", workerArgs(u, w, "--appends", "1")...)
		p.wait(t, time.Minute)
		if p.cmd.ProcessState.ExitCode() != 0 {
			t.Fatalf("final worker %d: %s", w, p.stderr())
		}
		all = append(all, acked(p.stdout())...)
	}
	n := checkOnce(t, u, all)
	t.Logf("faults: %d kills, %d restarts (MinIO once); %d rows acknowledged, table holds %d rows, each acknowledged row once", kills, restarts, len(all), n)
}

// The compactor Job, once, against MinIO: exit code, summary, fewer
// fragments.
func TestCompactorJobOnce(t *testing.T) {
	minio := testenv.MinIO(t)
	u := strings.Replace(minio.URL(t), "?", "/jobtable?", 1)
	for w := range 3 {
		p := run(t, "strata", "worker", u, "--worker", fmt.Sprint(w), "--appends", "6", "--rows", "10", "--flush-interval", "1ms", "--merge-interval", "1ms")
		p.wait(t, time.Minute)
	}
	b, err := blob.Open(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	before, err := table.ReadLatest(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	p := run(t, "strata-compactor", "--once", "--table", u, "--min-fragments", "2")
	p.wait(t, time.Minute)
	if code := p.cmd.ProcessState.ExitCode(); code != 0 {
		t.Fatalf("exit %d\n%s", code, p.stderr())
	}
	after, err := table.ReadLatest(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(p.stdout(), "1 compacted") || len(after.Fragments) >= len(before.Fragments) || after.Rows() != before.Rows() {
		t.Fatalf("job: %q; fragments %d -> %d, rows %d -> %d\n%s", p.stdout(), len(before.Fragments), len(after.Fragments), before.Rows(), after.Rows(), p.stderr())
	}
	// What landed in MinIO, listed apart from the code under test: the
	// versions Strata reports, each one manifest, the newest first, and
	// the fragments the newest names.
	versions, err := table.Versions(ctx, b, 0, false)
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, v := range versions {
		want = append(want, format.ManifestKey(v.Version))
	}
	slices.Sort(want)
	if got := minio.Keys(t, u, format.VersionsDir); !slices.Equal(got, want) || got[0] != format.ManifestKey(after.Version) {
		t.Fatalf("MinIO holds the manifests %v; Strata reports %v, the newest v%d", got, want, after.Version)
	}
	stored := minio.Keys(t, u, "")
	for _, f := range after.Fragments {
		if _, found := slices.BinarySearch(stored, f.Key); !found {
			t.Fatalf("fragment %s of v%d is not in MinIO (it holds %d objects of the table)", f.Key, after.Version, len(stored))
		}
	}
	t.Logf("compactor --once: %s fragments %d -> %d; MinIO holds %d manifests, %d objects of the table in all", strings.TrimSpace(p.stdout()),
		len(before.Fragments), len(after.Fragments), len(want), len(stored))
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// waitForTable waits until the table at u exists (its first version is
// there).
func waitForTable(t *testing.T, u string) {
	t.Helper()
	b, err := blob.Open(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	testenv.Eventually(t, time.Minute, "the table at "+u, func() bool {
		_, err := table.LatestVersion(ctx, b)
		return err == nil
	})
}
