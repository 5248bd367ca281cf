// Command strata-iceberg writes a Strata table's Apache Iceberg view (the
// verb `strata export iceberg`, which runs this program). It is a program
// of its own because the Iceberg writer's libraries cost every program
// that links them about 120 ms and 32 MB at start-up; the strata command
// links none of it.
package main

import (
	"os"

	"github.com/stratadb/strata/blob"
	_ "github.com/stratadb/strata/blob/gcs" // gs:// URLs
	"github.com/stratadb/strata/cmd/strata-iceberg/icebergcmd"
	"github.com/stratadb/strata/cmd/strata/command"
)

func main() {
	os.Exit(command.RunRoot(os.Args[1:], &command.Env{Out: os.Stdout, Err: os.Stderr, Open: blob.Open}, icebergcmd.New))
}
