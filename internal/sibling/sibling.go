// Package sibling finds the programs the strata command runs for what it
// does not link itself (strata-engine, strata-full, strata-iceberg): beside
// the running executable first, as an install or the image puts them,
// then on PATH. It imports only the standard library, so that the strata
// front, which starts in a few milliseconds, can use it.
package sibling

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
)

// ErrMissing is the kind of error Find returns when none of the programs
// is beside the executable or on PATH.
var ErrMissing = errors.New("program not installed")

// Find returns the path of the first of names that is beside the running
// executable (its symbolic links followed), else of the first on PATH: a
// program installed with this one wins over any on PATH, which may be of
// another build. The error names the first of names.
func Find(names ...string) (string, error) {
	dir, self := "", "strata"
	if exe, err := os.Executable(); err == nil {
		self = filepath.Base(exe)
		if real, err := filepath.EvalSymlinks(exe); err == nil {
			exe = real
		}
		dir = filepath.Dir(exe)
		for _, name := range names {
			p := filepath.Join(dir, Exe(name))
			if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() && (runtime.GOOS == "windows" || st.Mode()&0o111 != 0) {
				return p, nil
			}
		}
	}
	for _, name := range names {
		if p, err := exec.LookPath(name); err == nil {
			return p, nil
		}
	}
	return "", missing(fmt.Sprintf("%s, which is neither in %s (beside %s) nor on PATH: install it with `go install github.com/stratadb/strata/cmd/%s@latest` (in a checkout: `go install ./cmd/...`); the image ships it",
		names[0], dir, self, names[0]))
}

// Exe is the file name of program name on this system (name.exe on
// Windows).
func Exe(name string) string {
	if runtime.GOOS == "windows" {
		return name + ".exe"
	}
	return name
}

// missing is Find's error: its text names the program and how to install
// it, to follow "strata VERB runs ".
type missing string

func (m missing) Error() string        { return string(m) }
func (m missing) Is(target error) bool { return target == ErrMissing }
