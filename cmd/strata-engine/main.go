// Command strata-engine carries the strata command's table verbs (package
// command) on folders, S3 and memory: the strata front runs it for every
// verb but serve and token and those naming a gs:// URL, which strata-full
// carries. It links neither the HTTP server nor the GCS driver, whose
// initialization would cost each verb tens of milliseconds more.
package main

import (
	"os"

	"github.com/stratadb/strata/cmd/strata/command"
)

func main() {
	os.Exit(command.Main(os.Args[1:], os.Stdout, os.Stderr))
}
