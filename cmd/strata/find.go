package main

import (
	"crypto/sha256"
	"encoding/hex"
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

// find returns the path of program: beside strata, else on PATH (for
// strata-engine, strata-full beside strata before either on PATH: it
// carries the same verbs, of the same build); or, for a strata built by
// go run, built from the same checkout.
func find(program string, args []string) (string, error) {
	if self, err := os.Executable(); err == nil && builtByGoRun(self) {
		return buildFromCheckout(program, args)
	}
	if program == engineProgram {
		return sibling.Find(engineProgram, fullProgram)
	}
	return sibling.Find(program)
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
// from (the working directory's module), with the build tags strata was
// built with, into a folder of the user's cache for that checkout and
// those tags, and returns its path. export and serve run strata-iceberg
// from beside the program: it is built too. go build relinks only what
// changed: a second run takes about a second. The build's own errors go
// to standard error.
func buildFromCheckout(program string, args []string) (string, error) {
	info, ok := debug.ReadBuildInfo()
	if !ok || !strings.HasSuffix(info.Path, "/cmd/strata") {
		return "", errors.New("a program built from this checkout, but this strata carries no build information to find the checkout by")
	}
	root, err := moduleRoot()
	if err != nil {
		return "", err
	}
	tags := ""
	for _, s := range info.Settings {
		if s.Key == "-tags" {
			tags = s.Value
		}
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("%s, built from this checkout, but there is no cache folder to build it in: %w", program, err)
	}
	sum := sha256.Sum256([]byte(root + "\x00" + tags))
	dir := filepath.Join(cache, "strata", "go-run", hex.EncodeToString(sum[:8]))
	cmdDir := strings.TrimSuffix(info.Path, "strata")
	pkgs := []string{cmdDir + program}
	if v := verbOf(args); v == "export" || v == "serve" {
		pkgs = append(pkgs, cmdDir+"strata-iceberg")
	}
	buildArgs := append([]string{"build", "-tags=" + tags, "-o", dir + string(os.PathSeparator)}, pkgs...)
	cmd := exec.Command("go", buildArgs...)
	cmd.Dir, cmd.Stdout, cmd.Stderr = root, os.Stderr, os.Stderr
	slow := time.AfterFunc(2*time.Second, func() {
		fmt.Fprintf(os.Stderr, "strata: building %s from this checkout (go run ./cmd/strata builds the program a verb needs; go install ./cmd/... installs them all)…\n", program)
	})
	err = cmd.Run()
	slow.Stop()
	if err != nil {
		return "", fmt.Errorf("%s, built from this checkout by `go %s`, which failed: %w", program, strings.Join(buildArgs, " "), err)
	}
	return filepath.Join(dir, sibling.Exe(program)), nil
}

// moduleRoot is the folder of the go.mod above the working directory: the
// checkout go run built strata in.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d, nil
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("a program built from the checkout go run built strata from, but %s is in no module: run go run ./cmd/strata in the checkout", dir)
		}
	}
}
