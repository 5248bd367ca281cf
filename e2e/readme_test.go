package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stratadb/strata/harness/testenv"
)

// readmeBlock is a fenced block of README.md: its language and lines.
type readmeBlock struct {
	lang  string
	lines []string
	at    int // the line of README.md it starts on
}

func readmeBlocks(t *testing.T) []readmeBlock {
	t.Helper()
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	var out []readmeBlock
	var cur *readmeBlock
	for i, line := range strings.Split(string(data), "\n") {
		switch {
		case cur == nil && strings.HasPrefix(line, "```"):
			cur = &readmeBlock{lang: strings.TrimPrefix(line, "```"), at: i + 1}
		case cur != nil && line == "```":
			out = append(out, *cur)
			cur = nil
		case cur != nil && len(cur.lines) > 0 && strings.HasSuffix(cur.lines[len(cur.lines)-1], "\\"):
			// A command continued on the next line: one line here, so
			// that line numbers stay those of the command's start.
			last := &cur.lines[len(cur.lines)-1]
			*last = strings.TrimSuffix(*last, "\\") + " " + strings.TrimSpace(line)
			cur.lines = append(cur.lines, "")
		case cur != nil:
			cur.lines = append(cur.lines, line)
		}
	}
	return out
}

// readmeSkips are the shell commands of README.md the test does not run,
// each with why: they need what a test run has not (Docker, a cluster,
// LanceDB, MinIO on port 9000), run for good, or are the test command
// itself.
var readmeSkips = []struct{ pattern, why string }{
	{`^\./scripts/test\.sh`, "the test command itself"},
	{`^docker `, "no Docker engine here"},
	{`^kubectl `, "no cluster here"},
	{`LANCE_BENCH|compare-lancedb`, "needs LanceDB"},
	{`strata-sim -duration`, "a 30-minute campaign"},
	{`^go run \./cmd/strata bench`, "benchmarks, measured on their own"},
	{`s3://|gs://`, "needs a store at the address the README names"},
	{`--interval `, "runs until stopped"},
	{`@latest`, "installs the published module; the test runs the binaries built from this checkout"},
	{`^strata demo$`, "the installed demo; the next section runs the same demo from the checkout"},
	{`--tokens |--server https://`, "a server with a tokens file or TLS, beside the walk-through's (e2e/tls_test.go runs these against one)"},
	{`--as-of `, "names a time before the walk-through's fresh tables were made (the flag's tests: table, server and command)"},
}

// expected matches output against a README comment line written after a
// command: its text, "…" standing for anything.
func expected(comment string) *regexp.Regexp {
	parts := strings.Split(strings.TrimSpace(comment), "…")
	for i, p := range parts {
		parts[i] = regexp.QuoteMeta(p)
	}
	return regexp.MustCompile(strings.Join(parts, ".*"))
}

// README.md's shell commands run as written, in order, in a fresh folder,
// with the binaries built from this checkout for `go run ./cmd/...`: each
// exits 0, and prints what a `# …` comment line after it says. The HTTP
// walk-through runs against the server its first line starts (on a free
// port instead of 8080), and the Python snippet against it too.
func TestREADMECommandsRunAsWritten(t *testing.T) {
	t.Parallel() // it waits on processes most of its time: it runs beside the others (not beside a test that stops MinIO)
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	env := append(os.Environ(), "PATH="+bins+string(os.PathListSeparator)+os.Getenv("PATH"), "CI=")
	port := freePort(t)
	local := func(line string) string {
		line = regexp.MustCompile(`go run \./cmd/(strata[a-z-]*)`).ReplaceAllString(line, "$1")
		line = strings.ReplaceAll(line, "localhost:8080", fmt.Sprintf("localhost:%d", port))
		return strings.ReplaceAll(line, "127.0.0.1:8080", fmt.Sprintf("127.0.0.1:%d", port))
	}
	sh := func(at int, line string) string {
		cmd := exec.Command("bash", "-o", "pipefail", "-c", line)
		cmd.Dir, cmd.Env = dir, env
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("README.md:%d: %s: %v\n%s", at, line, err, out)
		}
		return string(out)
	}
	ran, skipped := 0, 0
	blocks := readmeBlocks(t)
	for bi, b := range blocks {
		if b.lang != "sh" {
			continue
		}
		if slices.ContainsFunc(b.lines, func(l string) bool { return strings.HasPrefix(l, "docker ") }) {
			// The rest of the block talks to what Docker Compose started.
			t.Logf("README.md:%d: block not run (no Docker engine here)", b.at)
			skipped += len(b.lines)
			continue
		}
		var server *exec.Cmd
		var out string
		for i, raw := range b.lines {
			at := b.at + 1 + i
			line := strings.TrimSpace(raw)
			if strings.HasPrefix(line, "#") {
				if out != "" && !expected(strings.TrimPrefix(line, "#")).MatchString(out) {
					t.Errorf("README.md:%d: the command before printed\n%s\nwant %q", at, out, strings.TrimPrefix(line, "# "))
				}
				continue
			}
			if line == "" {
				continue
			}
			out = ""
			skip := ""
			for _, s := range readmeSkips {
				if regexp.MustCompile(s.pattern).MatchString(line) {
					skip = s.why
				}
			}
			if skip != "" {
				t.Logf("README.md:%d: not run (%s): %s", at, skip, line)
				skipped++
				continue
			}
			line = local(line)
			ran++
			if strings.Contains(line, "strata serve") {
				server = exec.Command("bash", "-c", "exec "+line)
				server.Dir, server.Env = dir, env
				if err := server.Start(); err != nil {
					t.Fatal(err)
				}
				defer func() { _ = server.Process.Kill(); _ = server.Wait() }()
				waitUp(t, fmt.Sprintf("http://127.0.0.1:%d/healthz", port))
				continue
			}
			out = sh(at, line)
		}
		if server != nil {
			// The Python snippet that follows the walk-through, against
			// the same server (with pandas, as the test command installs).
			py := readmePython(blocks[bi+1:])
			if py == "" {
				t.Fatal("no Python snippet after the HTTP walk-through")
			}
			script := filepath.Join(dir, "snippet.py")
			if err := os.WriteFile(script, []byte(local(py)), 0o644); err != nil {
				t.Fatal(err)
			}
			python := "python3"
			if exec.Command("/usr/bin/python3", "-c", "import pandas, torch").Run() == nil {
				python = "/usr/bin/python3"
			}
			cmd := exec.Command(python, script)
			cmd.Dir, cmd.Env = dir, append(env, "PYTHONPATH="+filepath.Join(root, "clients", "python"))
			if pyOut, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("the README's Python snippet: %v\n%s", err, pyOut)
			} else if !strings.Contains(string(pyOut), "{'id': 1}") {
				t.Errorf("the README's Python snippet printed %q, want the row of id 1", pyOut)
			}
			// The connect() snippet after it: a server of its own, on a
			// folder, that the connection starts and stops.
			if py := readmePython(afterPython(blocks[bi+1:])); !strings.Contains(py, "connect(") {
				t.Error("no connect() snippet after the Python client's")
			} else {
				if err := os.WriteFile(script, []byte(local(py)), 0o644); err != nil {
					t.Fatal(err)
				}
				cmd := exec.Command(python, script)
				cmd.Dir, cmd.Env = dir, append(env, "PYTHONPATH="+filepath.Join(root, "clients", "python"))
				if pyOut, err := cmd.CombinedOutput(); err != nil || strings.TrimSpace(string(pyOut)) != "2" {
					t.Errorf("the README's connect() snippet: %v, printed %q, want 2", err, pyOut)
				}
			}
			// The training snippet after them, against the same server
			// (with torch, as the test command installs).
			if py := readmePython(afterPython(afterPython(blocks[bi+1:]))); !strings.Contains(py, "TableDataset(") {
				t.Error("no TableDataset snippet after the connect() one")
			} else {
				if err := os.WriteFile(script, []byte(local(py)), 0o644); err != nil {
					t.Fatal(err)
				}
				cmd := exec.Command(python, script)
				cmd.Dir, cmd.Env = dir, append(env, "PYTHONPATH="+filepath.Join(root, "clients", "python"))
				if pyOut, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(pyOut), " rows") {
					t.Errorf("the README's TableDataset snippet: %v, printed %q", err, pyOut)
				}
			}
			_ = server.Process.Signal(syscall.SIGTERM)
			done := make(chan error, 1)
			go func() { done <- server.Wait() }()
			select {
			case <-done:
			case <-time.After(30 * time.Second):
				t.Fatal("strata serve did not stop within 30 s of SIGTERM")
			}
		}
	}
	if ran < 20 {
		t.Fatalf("ran %d of README.md's commands (%d not run): the blocks are no longer found", ran, skipped)
	}
	t.Logf("ran %d of README.md's shell commands and its Python snippet; %d not run, each named above", ran, skipped)
}

// readmePython is the first Python block among blocks.
// afterPython is what follows the first Python block of blocks.
func afterPython(blocks []readmeBlock) []readmeBlock {
	for i, b := range blocks {
		if b.lang == "python" {
			return blocks[i+1:]
		}
	}
	return nil
}

func readmePython(blocks []readmeBlock) string {
	for _, b := range blocks {
		if b.lang == "python" {
			return strings.Join(b.lines, "\n") + "\n"
		}
	}
	return ""
}
