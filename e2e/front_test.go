package e2e

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// front runs the built strata front to its end: its exit
// status and what it printed. env is added to the environment, whose PATH
// holds no strata program, so that a missing one is not found elsewhere.
func front(t *testing.T, dir string, env []string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	cmd := exec.Command(filepath.Join(dir, "strata"), args...)
	cmd.Env = append(append(os.Environ(), "PATH="+t.TempDir()), env...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("strata %q: %v", args, err)
	}
	return cmd.ProcessState.ExitCode(), out.String(), errOut.String()
}

// only copies the named programs of bins into a folder of their own.
func only(t *testing.T, programs ...string) string {
	t.Helper()
	dir := t.TempDir()
	for _, p := range programs {
		data, err := os.ReadFile(filepath.Join(bins, p))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, p), data, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// The strata front answers version and help by itself, as the whole
// command would, and runs every verb with the program that carries it,
// in its place: the verb's output and exit status are the front's.
func TestTheFrontRunsEachVerbsProgram(t *testing.T) {
	full := func(args ...string) string {
		out, err := exec.Command(filepath.Join(bins, "strata-full"), args...).Output()
		if err != nil {
			t.Fatalf("strata-full %q: %v", args, err)
		}
		return string(out)
	}
	alone := only(t, "strata")
	for _, args := range [][]string{{"version"}, {"--help"}} {
		code, out, errOut := front(t, alone, nil, args...)
		if want := full(args...); code != 0 || out != want {
			t.Errorf("strata %q alone: exit %d\n%s\nwant, as strata-full prints it:\n%s%s", args, code, out, want, errOut)
		}
	}
	// Without the verb's program: a clear error naming it and how to
	// install it, exit 1.
	code, _, errOut := front(t, alone, nil, "scan", "./t")
	if code != 1 || !strings.Contains(errOut, "strata: scan runs strata-engine, which is neither in "+alone+" (beside strata) nor on PATH") || !strings.Contains(errOut, "go install") {
		t.Errorf("scan without strata-engine: exit %d: %s", code, errOut)
	}

	dir := t.TempDir()
	u := "file://" + dir + "/t"
	schema := filepath.Join(dir, "schema.json")
	rows := filepath.Join(dir, "rows.jsonl")
	if err := os.WriteFile(schema, []byte(`{"fields": [{"name": "id", "type": "int64"}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(rows, []byte("{\"id\": 7}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		code int
		says string
	}{
		{[]string{"create", u, "--schema", schema}, 0, "version 1"},
		{[]string{"append", u, rows}, 0, "appended 1 rows"},
		{[]string{"scan", u, "--format", "jsonl"}, 0, `{"id":7}`},
		{[]string{"scan", u + "-missing"}, 5, "no table at"},
		{[]string{"scan"}, 2, "scan takes 1 argument(s), got 0"},
		{[]string{"no-such-verb"}, 2, `unknown command "no-such-verb"`},
		{[]string{"token", "new", "--name", "n", "--grant", "read:*"}, 0, "token: strata_"},
		{[]string{"serv"}, 2, "serve"}, // did you mean
		{[]string{"__complete", "serve", "--b"}, 0, "--bucket"},
		{[]string{"__complete", ""}, 0, "token"},
	} {
		code, out, errOut := front(t, bins, nil, c.args...)
		if code != c.code || !strings.Contains(out+errOut, c.says) {
			t.Errorf("strata %q: exit %d, want %d saying %q\n%s%s", c.args, code, c.code, c.says, out, errOut)
		}
	}

	// Without strata-engine, strata-full carries its verbs too; beside
	// strata, it wins over a strata-engine on PATH (of another build).
	stale := t.TempDir()
	if err := os.WriteFile(filepath.Join(stale, "strata-engine"), []byte("#!/bin/sh\nexit 42\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(filepath.Join(only(t, "strata", "strata-full"), "strata"), "scan", u, "--format", "jsonl")
	cmd.Env = append(os.Environ(), "PATH="+stale)
	out, err := cmd.Output()
	if err != nil || string(out) != "{\"id\":7}\n" {
		t.Errorf("scan with strata-full alone beside strata and a strata-engine on PATH: %v\n%s", err, out)
	}

	// A gs:// URL goes to strata-full, which links the GCS driver (here
	// it fails to reach the store); strata-engine, run directly, says it
	// does not link it and what does.
	gcs := []string{"STORAGE_EMULATOR_HOST=127.0.0.1:1"}
	for _, url := range []string{"gs://lake/t", "GS://lake/t"} {
		code, _, errOut = front(t, bins, gcs, "scan", url)
		if code == 0 || strings.Contains(errOut, "does not link the GCS driver") {
			t.Errorf("scan %s through the front: exit %d: %s", url, code, errOut)
		}
	}
	eng := exec.Command(filepath.Join(bins, "strata-engine"), "scan", "gs://lake/t")
	msg, err := eng.CombinedOutput()
	if ee := (*exec.ExitError)(nil); !errors.As(err, &ee) || ee.ExitCode() != 2 || !strings.Contains(string(msg), "does not link the GCS driver: the strata command opens gs:// URLs through strata-full") {
		t.Errorf("strata-engine scan gs://: %v: %s", err, msg)
	}
}

// Each program initializes only what its verbs use: GODEBUG=inittrace=1
// lists every package's initialization and what it allocated. The front
// initializes the standard library alone; strata-engine none of the
// server's, the GCS client's or iceberg-go's packages; and each stays
// within a budget of bytes allocated at start-up (about 2.3 KB, 1.6 MB
// and 5.2 MB when pinned), so that a new import cannot bring the cost
// back unseen. Time is not pinned here (the benchmark's figure): bytes
// allocated follow the same packages and do not vary with the machine.
func TestEachProgramInitializesOnlyWhatItUses(t *testing.T) {
	for _, c := range []struct {
		program string
		budget  int
		banned  []string
	}{
		{"strata", 16 << 10, []string{"github.com/", "golang.org/", "google.golang.org/", "cloud.google.com/", "gocloud.dev/"}},
		{"strata-engine", 2 << 20, []string{"github.com/stratadb/strata/server", "github.com/prometheus/", "cloud.google.com/", "github.com/apache/iceberg-go", "github.com/stratadb/strata/blob/gcs"}},
		{"strata-full", 6 << 20, []string{"github.com/apache/iceberg-go/table"}},
	} {
		cmd := exec.Command(filepath.Join(bins, c.program), "version")
		cmd.Env = append(os.Environ(), "GODEBUG=inittrace=1")
		var trace bytes.Buffer
		cmd.Stderr = &trace
		if err := cmd.Run(); err != nil {
			t.Fatalf("%s version: %v\n%s", c.program, err, trace.String())
		}
		total, inits := 0, 0
		for line := range strings.Lines(trace.String()) {
			// init PKG @T ms, C ms clock, N bytes, M allocs
			f := strings.Fields(line)
			if len(f) < 11 || f[0] != "init" || f[8] != "bytes," {
				continue
			}
			n, err := strconv.Atoi(f[7])
			if err != nil {
				t.Fatalf("%s: %q: %v", c.program, line, err)
			}
			total += n
			inits++
			for _, b := range c.banned {
				if strings.HasPrefix(f[1], b) {
					t.Errorf("%s initializes %s: only the programs that use it may link it", c.program, f[1])
				}
			}
		}
		if inits == 0 {
			t.Fatalf("%s: no init lines in\n%s", c.program, trace.String())
		}
		t.Logf("%s: %d packages initialized, %d bytes allocated", c.program, inits, total)
		if total > c.budget {
			t.Errorf("%s allocates %d bytes initializing %d packages, over its budget of %d: an import brought a package whose initialization every start of it pays", c.program, total, inits, c.budget)
		}
	}
}
