package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"
	"time"

	"github.com/stratadb/strata/internal/sibling"
)

// find returns the path of program: beside strata or on PATH (strata-full
// for a missing strata-engine), or, for a strata built by go run, built
// from the same checkout.
func find(program string) (string, error) {
	if self, err := os.Executable(); err == nil && builtByGoRun(self) {
		return buildFromCheckout(program)
	}
	p, err := sibling.Find(program)
	if err == nil {
		return p, nil
	}
	if program == engineProgram {
		if p, err := sibling.Find(fullProgram); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("runs %w", err)
}

// builtByGoRun: go run builds its program into a temporary go-build
// folder (…/go-build123/b001/exe/strata), and runs it again from its copy
// in the build cache (GOCACHE/ab/abcd…(64 hex digits)-d/strata).
func builtByGoRun(self string) bool {
	dir := filepath.Dir(self)
	if filepath.Base(dir) == "exe" && strings.Contains(filepath.ToSlash(dir), "/go-build") {
		return true
	}
	h, ok := strings.CutSuffix(filepath.Base(dir), "-d")
	return ok && len(h) == 64 && strings.Trim(h, "0123456789abcdef") == "" && filepath.Base(filepath.Dir(dir)) == h[:2]
}

// buildFromCheckout builds program from the checkout go run built strata
// from (the working directory's module), into the user's cache folder,
// and returns its path. go build relinks only what changed: a second run
// takes about a second. The build's own errors go to standard error.
func buildFromCheckout(program string) (string, error) {
	info, ok := debug.ReadBuildInfo()
	if !ok || !strings.HasSuffix(info.Path, "/cmd/strata") {
		return "", errors.New("runs a program built from this checkout, but this strata carries no build information to find the checkout by")
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("runs %s, built from this checkout, but there is no cache folder to build it in: %w", program, err)
	}
	out := filepath.Join(cache, "strata", "go-run", program)
	pkg := strings.TrimSuffix(info.Path, "strata") + program
	cmd := exec.Command("go", "build", "-o", out, pkg)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	slow := time.AfterFunc(2*time.Second, func() {
		fmt.Fprintf(os.Stderr, "strata: building %s from this checkout (go run ./cmd/strata builds the program a verb needs; go install ./cmd/... installs them all)…\n", program)
	})
	err = cmd.Run()
	slow.Stop()
	if err != nil {
		return "", fmt.Errorf("runs %s, built from this checkout by `go build %s`, which failed: %w", program, pkg, err)
	}
	return out, nil
}
