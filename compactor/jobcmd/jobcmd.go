// Package jobcmd is the command line of strata-compactor: flags, their
// STRATA_* environment variables, JSON logs, and exit codes (0 success,
// 1 a table failed, 2 usage).
package jobcmd

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/compactor"
	"github.com/stratadb/strata/internal/buildinfo"
)

type listFlag []string

func (l *listFlag) String() string { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error {
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			*l = append(*l, s)
		}
	}
	return nil
}

const usage = `Usage: strata-compactor --table URL [--table URL …] [flags]

The singleton Job of each Strata table. Each pass merges the flushed
generations of every shard in one commit (a fleet merge), adopts shards whose
owner has written nothing for --adopt-after while holding rows not in the
table, compacts when due, and collects garbage.
Every flag can also be set by an environment variable, STRATA_ and the flag's
name in capitals with '-' as '_' (STRATA_TABLE, STRATA_MIN_FRAGMENTS, …).
S3 credentials come from AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_REGION.

Examples:
  strata-compactor --once --table file://./strata-demo
  strata-compactor --once --tables-under 's3://lake/tables?endpoint=http://minio:9000' --quiet-windows 8-18
  strata-compactor --interval 5m --table s3://lake/rollouts --min-fragments 32

Flags:
`

// Main runs the command and returns the exit status.
func Main(ctx context.Context, args, environ []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("strata-compactor", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, usage)
		fs.PrintDefaults()
	}
	var (
		tables, under, windows          listFlag
		once, dryRun, noGC, noFleet     bool
		interval, leaseTTL, adoptAfter  time.Duration
		retain, safety                  time.Duration
		minFragments, maxSources, keepV int
		targetRows, targetBytes         int64
		holder, metricsListen           string
		showVersion                     bool
	)
	fs.StringVar(&metricsListen, "metrics-listen", "", "with --interval: serve Prometheus metrics on this address (e.g. :9090), at /metrics")
	fs.BoolVar(&showVersion, "version", false, "print the version of this build and exit")
	fs.Var(&tables, "table", "table URL (repeatable, or comma-separated)")
	fs.Var(&under, "tables-under", "compact every table under this bucket URL (repeatable)")
	fs.BoolVar(&once, "once", false, "one pass, then exit (for a CronJob)")
	fs.DurationVar(&interval, "interval", 0, "loop, starting a pass this often")
	fs.BoolVar(&dryRun, "dry-run", false, "print the plans and what GC would delete; change nothing")
	fs.IntVar(&minFragments, "min-fragments", 16, "compact once a table has this many small fragments")
	fs.Var(&windows, "quiet-windows", "UTC hour windows with no compaction, e.g. 22-6 (repeatable, or comma-separated)")
	fs.Int64Var(&targetRows, "target-rows", 1_000_000, "rows per output fragment at most")
	fs.Int64Var(&targetBytes, "target-bytes", 512<<20, "bytes per output fragment at most")
	fs.IntVar(&maxSources, "max-source-fragments", 1024, "source fragments per run at most")
	fs.BoolVar(&noGC, "no-gc", false, "skip garbage collection")
	fs.IntVar(&keepV, "keep-versions", 10, "GC: newest versions always kept")
	fs.DurationVar(&retain, "retain", time.Hour, "GC: versions younger than this are kept (at least 5m)")
	fs.DurationVar(&safety, "safety-age", time.Hour, "GC: unreferenced objects younger than this are kept (at least 5m)")
	fs.DurationVar(&leaseTTL, "lease-ttl", 30*time.Minute, "how long a lease holds before another Job may break it")
	fs.StringVar(&holder, "holder", "", "lease holder name (default: the hostname)")
	fs.BoolVar(&noFleet, "no-fleet-merge", false, "do not merge the shards' flushed generations first")
	fs.DurationVar(&adoptAfter, "adopt-after", 15*time.Minute, "adopt a shard whose owner has written nothing this long and that holds rows not in the table (0: never)")

	// Environment variables first; flags on the command line win.
	env := map[string]string{}
	for _, kv := range environ {
		if k, v, ok := strings.Cut(kv, "="); ok {
			env[k] = v
		}
	}
	var envErr error
	fs.VisitAll(func(f *flag.Flag) {
		name := "STRATA_" + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))
		if v, ok := env[name]; ok && envErr == nil {
			if err := fs.Set(f.Name, v); err != nil {
				envErr = fmt.Errorf("%s=%q: %w", name, v, err)
			}
		}
	})
	if envErr != nil {
		fmt.Fprintln(stderr, "strata-compactor:", envErr)
		return 2
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if showVersion {
		fmt.Fprintf(stdout, "strata-compactor %s\n", buildinfo.Get())
		return 0
	}
	if fs.NArg() > 0 || once == (interval > 0) || len(tables)+len(under) == 0 {
		fmt.Fprintln(stderr, "strata-compactor: give --table or --tables-under, and exactly one of --once and --interval")
		fs.Usage()
		return 2
	}
	var quiet []compactor.Window
	for _, w := range windows {
		win, err := compactor.ParseWindow(w)
		if err != nil {
			fmt.Fprintln(stderr, "strata-compactor:", err)
			return 2
		}
		quiet = append(quiet, win)
	}
	if holder == "" {
		holder, _ = os.Hostname()
	}
	log := slog.New(slog.NewJSONHandler(stderr, nil))
	log.Info("starting", "version", buildinfo.Get().Version, "revision", buildinfo.Get().Revision)
	for _, root := range under {
		found, err := compactor.DiscoverTables(ctx, blob.Open, root)
		if err != nil {
			log.Error("listing tables failed", "under", root, "error", err.Error())
			return 1
		}
		log.Info("tables found", "under", root, "count", len(found))
		tables = append(tables, found...)
	}
	opts := compactor.JobOptions{
		Tables: tables,
		Policy: compactor.Policy{MinFragments: minFragments, QuietWindows: quiet, TargetRows: targetRows,
			TargetBytes: targetBytes, MaxSourceFragments: maxSources},
		GC:           compactor.GCPolicy{KeepVersions: keepV, RetainFor: retain, SafetyAge: safety},
		NoGC:         noGC,
		LeaseTTL:     leaseTTL,
		Holder:       holder,
		DryRun:       dryRun,
		Log:          log,
		NoFleetMerge: noFleet,
		AdoptAfter:   adoptAfter,
	}
	if adoptAfter == 0 {
		opts.AdoptAfter = -1
	}
	if metricsListen != "" {
		if interval == 0 {
			fmt.Fprintln(stderr, "strata-compactor: --metrics-listen needs --interval (a --once pass ends before a scrape)")
			return 2
		}
		m := newJobMetrics()
		m.wire(&opts)
		stopMetrics, err := m.serve(ctx, metricsListen, log)
		if err != nil {
			log.Error("metrics listener failed", "error", err.Error())
			return 1
		}
		defer stopMetrics()
	}
	if interval > 0 {
		if err := compactor.Loop(ctx, &opts, interval); err != nil {
			return 1
		}
		return 0
	}
	sum, err := compactor.RunOnce(ctx, &opts)
	fmt.Fprintf(stdout, "strata-compactor: %d tables: %d compacted, %d skipped, %d failed; fragments %d -> %d; gc deleted %d versions, %d objects; %d generations fleet-merged, %d shards adopted\n",
		sum.Tables, sum.Compacted, sum.Skipped, sum.Failed, sum.FragmentsBefore, sum.FragmentsAfter, sum.VersionsDeleted, sum.ObjectsDeleted, sum.FleetMerged, sum.Adopted)
	if err != nil {
		return 1
	}
	return 0
}
