//go:build unix

package main

import (
	"os"
	"syscall"
)

// run executes path in this process's place, with argv (argv[0] kept, so
// that the verb names itself as it was run) and the environment. It
// returns only when that fails.
func run(path string, argv []string) error {
	return syscall.Exec(path, argv, os.Environ())
}
