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
)

// ErrMissing is the kind of error Find returns when the program is
// neither beside the executable nor on PATH.
var ErrMissing = errors.New("program not installed")

// Find returns the path of the program name: beside the running
// executable (its symbolic links followed), then on PATH.
func Find(name string) (string, error) {
	if self, err := os.Executable(); err == nil {
		if real, err := filepath.EvalSymlinks(self); err == nil {
			self = real
		}
		p := filepath.Join(filepath.Dir(self), name)
		if st, err := os.Stat(p); err == nil && !st.IsDir() && st.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	return "", missing(fmt.Sprintf("%s, which is neither beside %s nor on PATH: install it with `go install github.com/stratadb/strata/cmd/%s@latest` (in a checkout: `go install ./cmd/...`); the image ships it",
		name, self(), name))
}

// missing is Find's error: its text names the program and how to install
// it, to follow "strata VERB runs ".
type missing string

func (m missing) Error() string        { return string(m) }
func (m missing) Is(target error) bool { return target == ErrMissing }

// self is the running executable's name, for errors.
func self() string {
	if p, err := os.Executable(); err == nil {
		return filepath.Base(p)
	}
	return "strata"
}
