// Package testenv starts the real servers that tests run against — MinIO
// for S3 and fake-gcs-server for GCS — once per test binary, on 127.0.0.1
// with free ports and temporary data folders, and stops them when the
// binary's tests end.
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
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
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
	return code
}

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
