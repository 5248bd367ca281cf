// Command strata-engine carries the strata command's table verbs (package
// command) on folders, S3 and memory: the strata front runs it for those
// verbs, unless one names a gs:// URL; strata-full carries the rest (serve,
// token, completion, gs:// URLs) and answers what the front cannot place
// (an unknown verb, flags before the verb). It links neither the HTTP
// server nor the GCS driver, whose initialization would cost each verb
// tens of milliseconds more.
package main

import (
	"os"

	"github.com/stratadb/strata/cmd/strata/command"
)

func main() {
	os.Exit(command.Main(os.Args[1:], os.Stdout, os.Stderr))
}
