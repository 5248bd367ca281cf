package main

import (
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// BenchmarkStartup times the strata command as its users meet it: the
// front built with its programs beside it, each verb run as a whole
// process. Each sub-benchmark reports the median and minimum of its runs
// in ms and the largest peak RSS in MB (measured by time(1), when the
// machine has it); first-request-* report the time from the process's
// start to the first request the store receives (a listener standing in
// for S3 or GCS, which refuses it with 403 so the verb gives up at once),
// which is what a verb's start-up costs before it does its work.
//
//	go test -run '^$' -bench Startup -benchtime 20x ./cmd/strata
func BenchmarkStartup(b *testing.B) {
	bin := b.TempDir()
	build := exec.Command("go", "build", "-o", bin+string(os.PathSeparator), ".", "../strata-engine", "../strata-full")
	if out, err := build.CombinedOutput(); err != nil {
		b.Fatalf("building the programs: %v\n%s", err, out)
	}
	strata := filepath.Join(bin, "strata")
	folder := filepath.Join(b.TempDir(), "t")
	schema := filepath.Join(b.TempDir(), "schema.json")
	if err := os.WriteFile(schema, []byte(`{"fields": [{"name": "id", "type": "int64"}]}`), 0o644); err != nil {
		b.Fatal(err)
	}
	if out, err := exec.Command(strata, "create", folder, "--schema", schema).CombinedOutput(); err != nil {
		b.Fatalf("create: %v\n%s", err, out)
	}
	// The peak RSS of a child of this (large) process would count the
	// pages it shares with it until it execs; time(1) forks the verb from
	// a small process of its own.
	timeProg, _ := exec.LookPath("time")
	if _, err := os.Stat("/usr/bin/time"); err == nil {
		timeProg = "/usr/bin/time"
	}
	store := newFirstRequest(b)
	s3 := []string{"AWS_ACCESS_KEY_ID=bench", "AWS_SECRET_ACCESS_KEY=bench", "AWS_REGION=us-east-1"}
	for _, c := range []struct {
		name  string
		args  []string
		env   []string
		first bool // time to the store's first request, not to the exit
	}{
		{"version", []string{"version"}, nil, false},
		{"help", []string{"--help"}, nil, false},
		{"scan-folder", []string{"scan", folder}, nil, false},
		{"first-request-s3", []string{"scan", "s3://b/t?endpoint=" + store.url}, s3, true},
		{"first-request-gs", []string{"scan", "gs://b/t"}, []string{"STORAGE_EMULATOR_HOST=" + store.addr}, true},
	} {
		b.Run(c.name, func(b *testing.B) {
			env := withoutCABundle(append(os.Environ(), c.env...))
			var ms []float64
			for b.Loop() {
				cmd := exec.Command(strata, c.args...)
				cmd.Env = env
				store.reset()
				start := time.Now()
				err := cmd.Run()
				took := time.Since(start)
				if c.first {
					at, ok := store.first()
					if !ok {
						b.Fatalf("strata %q made no request to the store (%v)", c.args, err)
					}
					took = at.Sub(start)
				} else if err != nil {
					b.Fatalf("strata %q: %v", c.args, err)
				}
				ms = append(ms, float64(took.Microseconds())/1000)
			}
			slices.Sort(ms)
			b.ReportMetric(ms[len(ms)/2], "median-ms")
			b.ReportMetric(ms[0], "min-ms")
			if timeProg == "" {
				return
			}
			// The peak, once more, outside the timed runs.
			rss := filepath.Join(b.TempDir(), "rss")
			cmd := exec.Command(timeProg, append([]string{"-f", "%M", "-o", rss, strata}, c.args...)...)
			cmd.Env = env
			_ = cmd.Run()
			data, err := os.ReadFile(rss)
			if err != nil {
				b.Fatal(err)
			}
			lines := strings.Fields(string(data)) // "Command exited with non-zero status 1" first, for a verb that failed
			kib, err := strconv.ParseFloat(lines[len(lines)-1], 64)
			if err != nil {
				b.Fatalf("time -f %%M wrote %q", data)
			}
			b.ReportMetric(kib/1024, "peak-MB")
		})
	}
}

// withoutCABundle leaves AWS_CA_BUNDLE out of env: the S3 client parses
// the bundle it names at start-up (about 10 ms for a system's 140
// certificates), a cost of that setting rather than of Strata's.
func withoutCABundle(env []string) []string {
	return slices.DeleteFunc(slices.Clone(env), func(kv string) bool { return strings.HasPrefix(kv, "AWS_CA_BUNDLE=") })
}

// firstRequest is a store that notes when its first request since reset
// came, and refuses every request (403, which no client retries).
type firstRequest struct {
	url, addr string
	mu        sync.Mutex
	at        time.Time
}

func newFirstRequest(b *testing.B) *firstRequest {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	f := &firstRequest{url: "http://" + ln.Addr().String(), addr: ln.Addr().String()}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		if f.at.IsZero() {
			f.at = time.Now()
		}
		f.mu.Unlock()
		w.WriteHeader(http.StatusForbidden)
	})}
	go func() { _ = srv.Serve(ln) }()
	b.Cleanup(func() { _ = srv.Close() })
	return f
}

func (f *firstRequest) reset() {
	f.mu.Lock()
	f.at = time.Time{}
	f.mu.Unlock()
}

func (f *firstRequest) first() (time.Time, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.at, !f.at.IsZero()
}
