package server_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/ipc"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/commit"
	"github.com/stratadb/strata/harness/rollouts"
	"github.com/stratadb/strata/harness/testenv"
	"github.com/stratadb/strata/server"
)

// rolloutsUnder writes a table name under dir of frags fragments of rows
// rows each, straight to the bucket.
func rolloutsUnder(t testing.TB, dir, name string, frags, rows int) {
	t.Helper()
	b, err := blob.Open(ctx, "file://"+dir+"/"+name)
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
	for i := range frags {
		rec := rollouts.Batch(testenv.Allocator(t), 42, 0, int64(i*rows), rows)
		_, err := tb.Append(ctx, rec)
		rec.Release()
		if err != nil {
			t.Fatal(err)
		}
	}
}

// slowReader reads at most 64 KiB every 5 ms.
type slowReader struct{ r io.Reader }

func (s slowReader) Read(p []byte) (int, error) {
	time.Sleep(5 * time.Millisecond)
	return s.r.Read(p[:min(len(p), 64<<10)])
}

// scanCount scans table name as Arrow IPC, reading the answer slowly
// when slow is set: its status, and the rows of a 200.
func scanCount(f *fixture, name string, slow bool) (int, int64, error) {
	resp, err := http.Get(f.http.URL + "/api/v1/tables/" + name + "/rows?format=arrow")
	if err != nil {
		return 0, 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, resp.Body)
		return resp.StatusCode, 0, nil
	}
	var body io.Reader = resp.Body
	if slow {
		body = slowReader{body}
	}
	r, err := ipc.NewReader(body)
	if err != nil {
		return resp.StatusCode, 0, err
	}
	defer r.Release()
	var n int64
	for r.Next() {
		n += r.RecordBatch().NumRows()
	}
	return resp.StatusCode, n, r.Err()
}

// Sixteen scans read slowly — holding their memory as long as they last
// — and a steady appender, against a budget that lets a few scans start
// at a time: every append is admitted — readers cannot take the write
// share — every scan answers the whole table or 429 before its answer
// starts, and once they are done a scan is admitted again: nothing stays
// held.
func TestScansDoNotStarveAnAppender(t *testing.T) {
	dir := t.TempDir()
	rolloutsUnder(t, dir, "r", 8, 400)
	f := start(t, "file://"+dir, server.Options{MemoryBudget: 20 << 20, BusyWait: 300 * time.Millisecond})
	done := make(chan struct{})
	var appends []int
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := 0; ; i++ {
			body := fmt.Sprintf(`{"id": %d, "worker": "w9", "step": 1, "ts": 1700000000000000, "reward": 0.5, "prompt": "p", "artifact": ""}`, 9_000_000_000+i)
			resp, err := http.Post(f.http.URL+"/api/v1/tables/r/rows", server.NDJSON, strings.NewReader(body))
			if err != nil {
				t.Error(err)
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			appends = append(appends, resp.StatusCode)
			select {
			case <-done:
				if i >= 20 {
					return
				}
			case <-time.After(20 * time.Millisecond):
			}
		}
	})
	var scans sync.WaitGroup
	codes := make([]int, 16)
	for i := range codes {
		scans.Go(func() {
			code, n, err := scanCount(f, "r", true)
			codes[i] = code
			if err != nil || code == http.StatusOK && n < 3200 || code != http.StatusOK && code != http.StatusTooManyRequests {
				t.Errorf("scan %d: %d, %d rows, %v", i, code, n, err)
			}
		})
	}
	scans.Wait()
	close(done)
	wg.Wait()
	for i, code := range appends {
		if code != http.StatusOK {
			t.Fatalf("append %d of %d while scans ran: %d", i, len(appends), code)
		}
	}
	t.Logf("scans answered %v; %d appends", codes, len(appends))
	if code, n, err := scanCount(f, "r", false); code != http.StatusOK || n < 3200 || err != nil {
		t.Fatalf("a scan once the others are done: %d, %d rows, %v", code, n, err)
	}
}

const serveChild = "server-serve"

func init() {
	testenv.RegisterChild(serveChild, func() int {
		args := testenv.ChildArgs()
		budget, err := strconv.ParseInt(args[1], 10, 64)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		// As `strata serve` does.
		debug.SetMemoryLimit(server.MemoryLimit(budget))
		srv, err := server.New(&server.Options{Bucket: args[0], Instance: "bench", MemoryBudget: budget,
			Log: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		hs := &http.Server{Handler: srv.Handler()}
		go func() { _ = hs.Serve(ln) }()
		fmt.Println(ln.Addr())
		_, _ = io.Copy(io.Discard, os.Stdin) // served until the parent closes stdin
		_ = hs.Close()
		_ = srv.Shutdown(context.Background())
		// The peak of this process's own memory: its rusage would count the
		// parent's too, whose memory the child shared until it ran.
		status, err := os.ReadFile("/proc/self/status")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		for line := range strings.Lines(string(status)) {
			if strings.HasPrefix(line, "VmHWM:") {
				fmt.Print(line)
			}
		}
		return 0
	})
}

// BenchmarkServerMemory serves, in a process of its own with a memory
// budget of 128 MiB (and Go's soft memory limit `strata serve` sets), a
// table of one 40,000-row fragment (three row groups, 45 MB) and forty
// small ones, to sixteen clients scanning it twice each (Arrow IPC, and
// four in JSON lines; a 429 is retried after 50 ms) while a client
// appends a row every 20 ms. It reports the server's peak RSS (its
// VmHWM) and the appends' latency, and fails when the peak passes the
// budget and server.FixedOverhead, or an append is refused.
//
//	go test -run '^$' -bench ServerMemory -benchtime 1x ./server
func BenchmarkServerMemory(b *testing.B) {
	const budget = 128 << 20
	dir := b.TempDir()
	rolloutsUnder(b, dir, "r", 1, 40_000)
	bk, err := blob.Open(ctx, "file://"+dir+"/r")
	if err != nil {
		b.Fatal(err)
	}
	tb, err := commit.OpenTable(ctx, bk, nil)
	if err != nil {
		b.Fatal(err)
	}
	for i := range 40 {
		rec := rollouts.Batch(testenv.Allocator(b), 42, 1, int64(i*250), 250)
		_, err := tb.Append(ctx, rec)
		rec.Release()
		if err != nil {
			b.Fatal(err)
		}
	}
	bk.Close()
	for b.Loop() {
		cmd := testenv.ChildCommand(serveChild, "file://"+dir, strconv.Itoa(budget))
		stdin, err := cmd.StdinPipe()
		if err != nil {
			b.Fatal(err)
		}
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			b.Fatal(err)
		}
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		out := bufio.NewReader(stdout)
		addr, err := out.ReadString('\n')
		if err != nil {
			b.Fatal(err)
		}
		lat, refused := serverLoad(b, "http://"+strings.TrimSpace(addr))
		stdin.Close()
		hwm, err := io.ReadAll(out)
		if err != nil {
			b.Fatal(err)
		}
		if err := cmd.Wait(); err != nil {
			b.Fatal(err)
		}
		var kib float64
		if _, err := fmt.Sscanf(string(hwm), "VmHWM: %f kB", &kib); err != nil {
			b.Fatalf("the server's peak RSS: %q: %v", hwm, err)
		}
		peak := kib / 1024
		b.ReportMetric(peak, "peak-rss-MiB")
		slices.Sort(lat)
		b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "append-p99-ms")
		if bound := float64(budget+server.FixedOverhead) / (1 << 20); peak > bound {
			b.Fatalf("16 scans and appends against a budget of %d MiB peaked at %.0f MiB, over the bound of %.0f MiB", budget>>20, peak, bound)
		}
		if refused > 0 {
			b.Fatalf("%d of %d appends were refused while scans ran", refused, len(lat)+refused)
		}
	}
}

// serverLoad runs sixteen clients scanning table r twice each, retrying
// a 429, and appends a row every 20 ms until they are done: the appends'
// latencies, and how many were refused.
func serverLoad(b *testing.B, url string) (lat []time.Duration, refused int) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := 0; ; i++ {
			body := fmt.Sprintf(`{"id": %d, "worker": "w9", "step": 1, "ts": 1700000000000000, "reward": 0.5, "prompt": "p", "artifact": ""}`, 9_000_000_000+i)
			t0 := time.Now()
			resp, err := http.Post(url+"/api/v1/tables/r/rows", server.NDJSON, strings.NewReader(body))
			if err != nil {
				b.Error(err)
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				lat = append(lat, time.Since(t0))
			} else {
				refused++
			}
			select {
			case <-done:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	})
	var scans sync.WaitGroup
	for i := range 16 {
		format := "arrow"
		if i%4 == 0 {
			format = "jsonl"
		}
		scans.Go(func() {
			for n := 0; n < 2; {
				resp, err := http.Get(url + "/api/v1/tables/r/rows?format=" + format)
				if err != nil {
					b.Error(err)
					return
				}
				_, err = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				switch {
				case err != nil || resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusTooManyRequests:
					b.Errorf("scan: %d %v", resp.StatusCode, err)
					return
				case resp.StatusCode == http.StatusOK:
					n++
				default:
					time.Sleep(50 * time.Millisecond)
				}
			}
		})
	}
	scans.Wait()
	close(done)
	wg.Wait()
	return lat, refused
}

// A fresh read of a value larger than the budget's part for what reads
// keep — rows still in the server's WAL — is answered, holding the whole
// part, rather than refused for bytes it could never be granted.
func TestAFreshReadOfAValueLargerThanItsPartIsAnswered(t *testing.T) {
	f := start(t, "file://"+t.TempDir(), server.Options{MemoryBudget: 8 << 20, BusyWait: 200 * time.Millisecond})
	code, msg := raw(t, f, "PUT", "/api/v1/tables/big", "application/json",
		`{"fields":[{"name":"id","type":"int64"},{"name":"payload","type":"binary"}]}`, "")
	if code != http.StatusCreated {
		t.Fatalf("create: %d %s", code, msg)
	}
	value := strings.Repeat("QUJD", 1<<20) // 4 MiB of base64: 3 MiB of bytes
	if code, msg := post(t, f, "/api/v1/tables/big/rows", server.NDJSON, []byte(`{"id": 1, "payload": "`+value+`"}`)); code != http.StatusOK {
		t.Fatalf("append: %d %s", code, msg)
	}
	code, body := raw(t, f, "GET", "/api/v1/tables/big/rows?fresh=true&format=jsonl", "", "", "")
	if code != http.StatusOK || !strings.Contains(body, value) {
		t.Fatalf("fresh read of a 3 MiB value with a budget of 8 MiB: %d, %d bytes", code, len(body))
	}
}
