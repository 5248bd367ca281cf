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

// find returns the path of the first of programs beside strata, else of
// the first on PATH (a program installed with strata wins over any on
// PATH, which may be of another build); or, for a strata built by go run,
// the first built from the same source.
func find(programs []string, args []string) (string, error) {
	if self, err := os.Executable(); err == nil && builtByGoRun(self) {
		return buildFromSource(programs[0], args)
	}
	return sibling.Find(programs...)
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

// buildFromSource builds program from the source go run built strata
// from — the checkout in the working directory's module, or the module
// version `go run …@version` fetched — with the build tags strata was
// built with, into a folder of the user's cache for that source and those
// tags, and returns its path. export and serve run strata-iceberg from
// beside the program: it is built too. go build relinks only what
// changed: a second run takes about a second. The build's own errors go
// to standard error.
func buildFromSource(program string, args []string) (string, error) {
	info, ok := debug.ReadBuildInfo()
	if !ok || !strings.HasSuffix(info.Path, "/cmd/strata") {
		return "", errors.New("a program built from the same source, but this strata carries no build information to find it by")
	}
	tags := ""
	for _, s := range info.Settings {
		if s.Key == "-tags" {
			tags = s.Value
		}
	}
	cmdDir := strings.TrimSuffix(info.Path, "strata")
	pkgs := []string{cmdDir + program}
	if v := verbOf(args); v == "export" || v == "serve" {
		pkgs = append(pkgs, cmdDir+"strata-iceberg")
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("%s, built from the same source, but there is no cache folder to build it in: %w", program, err)
	}
	// go run github.com/stratadb/strata/cmd/strata@v: that version, else
	// the checkout.
	source, version, root := info.Main.Path, info.Main.Version, ""
	if version != "" && version != "(devel)" {
		source += "@" + version
	} else if root, err = checkout(info.Main.Path); err != nil {
		return "", err
	} else {
		source = root
	}
	sum := sha256.Sum256([]byte(source + "\x00" + tags))
	dir := filepath.Join(cache, "strata", "go-run", hex.EncodeToString(sum[:8]))
	var cmd *exec.Cmd
	if root != "" {
		cmd = exec.Command("go", append([]string{"build", "-tags=" + tags, "-o", dir + string(os.PathSeparator)}, pkgs...)...)
		cmd.Dir = root
	} else {
		install := []string{"install", "-tags=" + tags}
		for _, p := range pkgs {
			install = append(install, p+"@"+version)
		}
		cmd = exec.Command("go", install...)
		cmd.Env = append(os.Environ(), "GOBIN="+dir)
	}
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	slow := time.AfterFunc(2*time.Second, func() {
		fmt.Fprintf(os.Stderr, "strata: building %s from %s (go run ./cmd/strata builds the program a verb needs; go install ./cmd/... installs them all)…\n", program, source)
	})
	err = cmd.Run()
	slow.Stop()
	if err != nil {
		return "", fmt.Errorf("%s, built from %s by `%s`, which failed: %w", program, source, strings.Join(cmd.Args, " "), err)
	}
	return filepath.Join(dir, sibling.Exe(program)), nil
}

// checkout is the folder of the go.mod above the working directory, the
// checkout go run built strata in: its module must be module.
func checkout(module string) (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for d := dir; ; d = filepath.Dir(d) {
		data, err := os.ReadFile(filepath.Join(d, "go.mod"))
		if err == nil {
			for line := range strings.Lines(string(data)) {
				if f := strings.Fields(line); len(f) == 2 && f[0] == "module" && strings.Trim(f[1], `"`) == module {
					return d, nil
				}
			}
			return "", fmt.Errorf("a program built from the checkout go run built strata in, but %s is the go.mod of another module than %s: run go run ./cmd/strata in the checkout", filepath.Join(d, "go.mod"), module)
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("a program built from the checkout go run built strata in, but %s is in no module: run go run ./cmd/strata in the checkout", dir)
		}
	}
}
