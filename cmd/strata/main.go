// Command strata manages Strata tables from a shell. Each verb lives in
// package command, in a file of its own.
package main

import (
	"os"

	"github.com/stratadb/strata/cmd/strata/command"
)

func main() {
	os.Exit(command.Main(os.Args[1:], os.Stdout, os.Stderr))
}
