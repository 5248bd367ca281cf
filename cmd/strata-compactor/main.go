// Command strata-compactor is the singleton compaction Job: for each table
// it takes the table's lease, compacts when the policy says so, records the
// run, and collects garbage. Run it from a cron line or a Kubernetes
// CronJob (--once), or as a long-lived process (--interval).
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	_ "github.com/stratadb/strata/blob/gcs" // gs:// URLs
	"github.com/stratadb/strata/cmd/strata-compactor/jobcmd"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(jobcmd.Main(ctx, os.Args[1:], os.Environ(), os.Stdout, os.Stderr))
}
