// Command strata-full carries every verb of the strata command and every
// store (package servecmd): serve, token, and gs:// URLs beside the table
// verbs. The strata front runs it for those, and for every verb when
// strata-engine is not installed.
package main

import (
	"os"

	"github.com/stratadb/strata/blob"
	_ "github.com/stratadb/strata/blob/gcs" // gs:// URLs
	"github.com/stratadb/strata/cmd/strata/command"
	"github.com/stratadb/strata/cmd/strata/servecmd"
)

func main() {
	os.Exit(command.RunRoot(os.Args[1:], &command.Env{Out: os.Stdout, Err: os.Stderr, Open: blob.Open, In: os.Stdin}, servecmd.NewRoot))
}
