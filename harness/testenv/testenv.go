// Package testenv starts the real servers that tests run against — MinIO
// for S3 and fake-gcs-server for GCS — once per test binary, on 127.0.0.1
// with free ports and temporary data folders, and stops them when the
// binary's tests end. It creates MinIO's bucket, and lists what landed
// there (Server.Keys), with minio-go: a client apart from the
// aws-sdk-go-v2 that the code under test speaks S3 with.
//
// The server binaries are found in $STRATA_MINIO / $STRATA_FAKE_GCS, in the
// repository's .tools/bin (where scripts/install-test-deps.sh puts them),
// or on $PATH. When one is missing, a test that needs it is skipped, except
// under CI=true, where it fails: a silent skip there would hide a broken
// install step.
//
// A test binary that uses this package calls Main from its TestMain.
package testenv

import (
	"fmt"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

var (
	stopMu sync.Mutex
	stops  []func()
)

// children maps a name to a function run instead of the tests when the
// binary is started as a helper process (see RunChild).
var children = map[string]func() int{}

// RegisterChild registers fn to run, instead of the tests, in a copy of the
// test binary started by ChildCommand(name, …).
func RegisterChild(name string, fn func() int) { children[name] = fn }

const childEnv = "STRATA_TESTENV_CHILD"

// ChildCommand returns a command that runs the registered child name in a
// copy of the current test binary, with args available to it as
// ChildArgs().
func ChildCommand(name string, args ...string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], append([]string{"-test.run=^$"}, args...)...)
	cmd.Env = append(os.Environ(), childEnv+"="+name)
	return cmd
}

// ChildArgs returns the arguments given to ChildCommand.
func ChildArgs() []string {
	var out []string
	for _, a := range os.Args[1:] {
		if !strings.HasPrefix(a, "-test.") {
			out = append(out, a)
		}
	}
	return out
}

// Main runs the tests (or a registered child) and stops every server the
// tests started. Use it as: func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }
func Main(m *testing.M) int {
	if name := os.Getenv(childEnv); name != "" {
		fn, ok := children[name]
		if !ok {
			fmt.Fprintf(os.Stderr, "testenv: no child %q registered\n", name)
			return 2
		}
		return fn()
	}
	code := m.Run()
	stopMu.Lock()
	defer stopMu.Unlock()
	for i := len(stops) - 1; i >= 0; i-- {
		stops[i]()
	}
	if n := Arrow.CurrentAlloc(); n != 0 && code == 0 {
		fmt.Fprintf(os.Stderr, "testenv: %d bytes of the batches the tests built (testenv.Arrow) were never released\n", n)
		Arrow.AssertSize(stderrT{}, 0)
		return 1
	}
	return code
}

// Arrow is the allocator of the batches that test helpers without a
// *testing.T build: Main fails the package's tests if any of it is still
// allocated when they end.
var Arrow = memory.NewCheckedAllocator(memory.NewGoAllocator())

// stderrT prints what the checked allocator reports.
type stderrT struct{}

func (stderrT) Errorf(format string, args ...any) { fmt.Fprintf(os.Stderr, format+"\n", args...) }
func (stderrT) Helper()                           {}

func atExit(fn func()) {
	stopMu.Lock()
	defer stopMu.Unlock()
	stops = append(stops, fn)
}

// InCI reports whether the tests run under CI: CI set to anything but
// empty, "0", "false" or "no" (CI=1 counts as CI=true does).
func InCI() bool {
	switch strings.ToLower(strings.TrimSpace(os.Getenv("CI"))) {
	case "", "0", "false", "no", "off":
		return false
	}
	return true
}

// need skips t, or fails it under CI, when a server cannot be had.
func need(t testing.TB, what string, err error) {
	t.Helper()
	if InCI() {
		t.Fatalf("%s is required under CI=true: %v (run scripts/install-test-deps.sh)", what, err)
	}
	t.Skipf("%s not available: %v (run scripts/install-test-deps.sh)", what, err)
}

// findBinary looks for a server binary.
func findBinary(envVar, name string) (string, error) {
	if p := os.Getenv(envVar); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("$%s=%s: %w", envVar, p, err)
		}
		return p, nil
	}
	if root, err := RepoRoot(); err == nil {
		p := filepath.Join(root, ".tools", "bin", name)
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	return "", fmt.Errorf("%s not found in $%s, .tools/bin or $PATH", name, envVar)
}

// RepoRoot returns the folder holding the module's go.mod.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if data, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil && strings.Contains(string(data), "module github.com/stratadb/strata\n") {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod of github.com/stratadb/strata above the working directory")
		}
		dir = parent
	}
}

// Eventually waits until cond holds, checking every 10ms, and fails the
// test naming what it waited for when timeout passes first. Tests wait on
// conditions, never on a sleep they assume long enough.
func Eventually(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited %v for %s", timeout, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Allocator returns an Arrow allocator that counts what the test
// allocates through it and fails the test, when it ends, if any of it was
// never released — by the test or by the engine it handed the batches to.
// (The engine's own buffers are not counted: its Parquet encoders keep
// pooled buffers for the life of the process.)
func Allocator(t testing.TB) memory.Allocator {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	t.Cleanup(func() { mem.AssertSize(t, 0) })
	return mem
}
