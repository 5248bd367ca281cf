// Package jobcmd is the command line of strata-compactor: flags, their
// STRATA_* environment variables, JSON logs, and exit codes (0 success,
// 1 a table failed, 2 usage).
package jobcmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/stratadb/strata/engine"
	"github.com/stratadb/strata/engine/iceberg"
	"github.com/stratadb/strata/internal/buildinfo"
	"github.com/stratadb/strata/internal/cli"
	"github.com/stratadb/strata/internal/policyflag"
	"github.com/stratadb/strata/job"
	"github.com/stratadb/strata/table"
)

const usage = `The singleton Job of each Strata table. Each pass merges the flushed
generations of every shard in one commit (a fleet merge), adopts shards whose
owner has written nothing for --adopt-after while holding rows not in the
table, compacts when due, with --iceberg brings the table's Iceberg view up to
date (see strata export iceberg), and collects garbage. With --parts N, N
such processes share each table's compaction: each compacts the bins of its
--part under a lease of its own, and part 0 alone merges, adopts and
collects.

A compaction holds at most --memory-budget bytes at once (256 MiB): a quarter
of it, up to 64 MiB, for the row group being written, the rest for the
sources being read, each reserving its weight before it is read (a source
heavier than the budget is read alone). A merge of the shards' flushed
generations holds to the same budget: the flush objects it reads and, when it
decodes them, their rows (a generation heavier than the budget is merged
alone). The process stays within the budget and a fixed overhead of 192 MiB:
Go's soft memory limit is set to the budget and 64 MiB, unless GOMEMLIMIT is
set.

Every flag can also be set by an environment variable, STRATA_ and the flag's
name in capitals with '-' as '_' (STRATA_TABLE, STRATA_MIN_FRAGMENTS, …); a
flag on the command line wins. S3 credentials come from AWS_ACCESS_KEY_ID,
AWS_SECRET_ACCESS_KEY, AWS_REGION.`

const examples = `  strata-compactor --once --table file://./strata-demo
  strata-compactor --once --tables-under 's3://lake/tables?endpoint=http://minio:9000' --quiet-windows 8-18
  strata-compactor --interval 5m --table s3://lake/rollouts --min-fragments 32
  strata-compactor --interval 5m --table s3://lake/rollouts --iceberg
  strata-compactor --interval 1m --table s3://lake/rollouts --parts 4 --part 2`

// usageError marks errors that exit with status 2.
type usageError struct{ error }

// Main runs the command and returns the exit status.
func Main(ctx context.Context, args, environ []string, stdout, stderr io.Writer) int {
	code := 0
	c := &cobra.Command{
		Use:           "strata-compactor --table URL [--table URL …] [flags]",
		Short:         "The singleton compaction Job of Strata tables",
		Long:          usage,
		Example:       examples,
		Args:          cobra.NoArgs,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	var f jobFlags
	var showVersion bool
	defineFlags(c.Flags(), &f, &showVersion)
	c.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return usageError{fmt.Errorf("%w\n\n%s", cli.FlagValueError(c.Flags(), err), c.UsageString())}
	})
	// Every flag can be set from the environment, read as strata reads
	// the few of its own: a flag on the command line wins.
	c.PersistentPreRunE = func(c *cobra.Command, args []string) error {
		if err := cli.Prepare(c.Flags(), environ); err != nil {
			return usageError{err}
		}
		return nil
	}
	c.RunE = func(c *cobra.Command, args []string) error {
		if showVersion {
			fmt.Fprintf(stdout, "strata-compactor %s\n", buildinfo.Get())
			return nil
		}
		if f.once == (f.interval > 0) || len(f.tables)+len(f.under) == 0 {
			return usageError{fmt.Errorf("give --table or --tables-under, and exactly one of --once and --interval\n\n%s", c.UsageString())}
		}
		f.partSet = c.Flags().Changed("part")
		for _, kv := range environ {
			if v, ok := strings.CutPrefix(kv, "JOB_COMPLETION_INDEX="); ok {
				f.jobIndex = v
			}
		}
		code = runJob(ctx, stdout, stderr, f)
		return nil
	}
	c.SetArgs(args)
	c.SetOut(stdout)
	c.SetErr(stderr)
	if err := c.ExecuteContext(ctx); err != nil {
		fmt.Fprintln(stderr, "strata-compactor:", err)
		var ue usageError
		if errors.As(err, &ue) || cli.IsCobraUsage(err) {
			return 2
		}
		return 1
	}
	return code
}

// defineFlags defines the command's flags in fs, to be parsed into f.
func defineFlags(fs *pflag.FlagSet, f *jobFlags, showVersion *bool) {
	fs.SortFlags = false
	fs.StringSliceVar(&f.tables, "table", nil, "table URL (repeatable, or comma-separated)")
	fs.StringSliceVar(&f.under, "tables-under", nil, "run on every table under this bucket URL, looked for again every minute (repeatable)")
	fs.BoolVar(&f.once, "once", false, "one pass, then exit (for a CronJob)")
	fs.DurationVar(&f.interval, "interval", 0, "loop, starting a pass this often")
	fs.BoolVar(&f.dryRun, "dry-run", false, "print the plans and what GC would delete; change nothing")
	f.policy = policyflag.Define(fs, true)
	fs.BoolVar(&f.noGC, "no-gc", false, "skip garbage collection")
	fs.BoolVar(&f.iceberg, "iceberg", false, "keep each table's Iceberg view (_iceberg/) up to date, every pass")
	fs.IntVar(&f.keepV, "keep-versions", 10, "GC: newest versions always kept")
	fs.DurationVar(&f.retain, "retain", time.Hour, "GC: versions younger than this are kept (at least 5m)")
	fs.DurationVar(&f.safety, "safety-age", time.Hour, "GC: unreferenced objects younger than this are kept (at least 5m)")
	fs.DurationVar(&f.consumerRetention, "consumer-retention", table.DefaultConsumerRetention, "GC: versions a named consumer has not read are kept while younger than this (at least 5m)")
	fs.DurationVar(&f.retireShards, "retire-shards-after", engine.DefaultRetireShardsAfter, "GC: delete the objects of a shard that holds nothing outside the table and has written nothing this long (at least 12h; 0: never)")
	fs.DurationVar(&f.leaseTTL, "lease-ttl", 30*time.Minute, "how long a lease holds before another Job may break it")
	fs.StringVar(&f.holder, "holder", "", "lease holder name (default: the hostname)")
	fs.BoolVar(&f.noFleet, "no-fleet-merge", false, "do not merge the shards' flushed generations first")
	fs.DurationVar(&f.adoptAfter, "adopt-after", 15*time.Minute, "adopt a shard whose owner has written nothing this long and that holds rows not in the table (0: never)")
	fs.StringVar(&f.metricsListen, "metrics-listen", "", "with --interval: serve Prometheus metrics on this address (e.g. :9090), at /metrics")
	fs.IntVar(&f.parts, "parts", 1, "split each table's compaction among this many Job processes, each given its --part")
	fs.IntVar(&f.part, "part", 0, "with --parts: which part this process compacts, from 0 (default: $JOB_COMPLETION_INDEX, as a Kubernetes Indexed Job sets it); part 0 also merges, adopts and collects")
	fs.Int64Var(&f.memoryBudget, "memory-budget", engine.DefaultMemoryBudget, "bytes a compaction or a merge may hold at once (at least 16 MiB)")
	fs.BoolVar(showVersion, "version", false, "print the version of this build and exit")
	boundFlags(fs)
}

// boundFlags declares the values each numeric flag takes: a value outside
// them is a usage error, from the command line or the environment.
func boundFlags(fs *pflag.FlagSet) {
	cli.Bound(fs, "keep-versions", 1, cli.Unlimited)
	for _, n := range []string{"interval", "adopt-after", "retire-shards-after"} {
		cli.Bound(fs, n, 0, cli.Unlimited)
	}
	// A duration the collector reads 0 of as its default, or raises to
	// its floor, is refused below the floor: 0 never means "the default".
	for _, n := range []string{"retain", "safety-age", "consumer-retention"} {
		cli.Bound(fs, n, int64(engine.MinRetain), cli.Unlimited)
	}
	cli.Bound(fs, "lease-ttl", int64(engine.MinLeaseTTL), cli.Unlimited)
	cli.Bound(fs, "memory-budget", engine.MinMemoryBudget, cli.Unlimited)
	cli.Bound(fs, "parts", 1, 1024)
	cli.Bound(fs, "part", 0, 1023)
}

// jobFlags is what the command line gave.
type jobFlags struct {
	tables, under                   []string
	once, dryRun, noGC, noFleet     bool
	iceberg                         bool
	interval, leaseTTL, adoptAfter  time.Duration
	retain, safety                  time.Duration
	consumerRetention, retireShards time.Duration
	keepV                           int
	memoryBudget                    int64
	part, parts                     int
	partSet                         bool   // --part or STRATA_PART given
	jobIndex                        string // JOB_COMPLETION_INDEX
	policy                          *policyflag.Flags
	holder, metricsListen           string
}

// runJob runs the Job as the flags say and returns the exit status.
func runJob(ctx context.Context, stdout, stderr io.Writer, f jobFlags) int {
	holder := f.holder
	policy, err := f.policy.Policy()
	if err != nil {
		fmt.Fprintln(stderr, "strata-compactor:", err)
		return 2
	}
	if holder == "" {
		holder, _ = os.Hostname()
	}
	if policy.Part, err = f.compactionPart(); err != nil {
		fmt.Fprintln(stderr, "strata-compactor:", err)
		return 2
	}
	log := slog.New(slog.NewJSONHandler(stderr, nil))
	log.Info("starting", "version", buildinfo.Get().Version, "revision", buildinfo.Get().Revision)
	opts := job.Options{
		Tables:     f.tables,
		Under:      f.under,
		Policy:     policy,
		GC:         engine.GCPolicy{KeepVersions: f.keepV, RetainFor: f.retain, SafetyAge: f.safety, ConsumerRetention: f.consumerRetention, RetireShardsAfter: neverIfZero(f.retireShards)},
		NoGC:       f.noGC,
		Iceberg:    f.iceberg,
		LeaseTTL:   f.leaseTTL,
		Holder:     holder,
		DryRun:     f.dryRun,
		Log:        log,
		NoMerge:    f.noFleet,
		AdoptAfter: f.adoptAfter,

		MemoryBudget: f.memoryBudget,
	}
	if f.iceberg {
		opts.Export = iceberg.ExportKept
	}
	if f.adoptAfter == 0 {
		opts.AdoptAfter = -1
	}
	if err := opts.Validate(); err != nil {
		fmt.Fprintln(stderr, "strata-compactor:", err)
		return 2
	}
	if os.Getenv("GOMEMLIMIT") == "" {
		// The collector works harder before the heap passes the budget
		// and what the Job holds besides, rather than letting it double.
		debug.SetMemoryLimit(job.MemoryLimit(f.memoryBudget))
	}
	if f.metricsListen != "" {
		if f.interval == 0 {
			fmt.Fprintln(stderr, "strata-compactor: --metrics-listen needs --interval (a --once pass ends before a scrape)")
			return 2
		}
		m := newJobMetrics()
		m.wire(&opts)
		stopMetrics, err := m.serve(ctx, f.metricsListen, log)
		if err != nil {
			log.Error("metrics listener failed", "error", err.Error())
			return 1
		}
		defer stopMetrics()
	}
	if f.interval > 0 {
		if err := job.Loop(ctx, &opts, f.interval); err != nil {
			return 1
		}
		return 0
	}
	sum, err := job.RunOnce(ctx, &opts)
	fmt.Fprintf(stdout, "strata-compactor: %d tables: %d compacted, %d skipped, %d failed; fragments %d -> %d; gc deleted %d versions, %d objects; %d generations merged, %d shards adopted\n",
		sum.Tables, sum.Compacted, sum.Skipped, sum.Failed, sum.FragmentsBefore, sum.FragmentsAfter, sum.VersionsDeleted, sum.ObjectsDeleted, sum.Merged, sum.Adopted)
	if err != nil {
		return 1
	}
	return 0
}

// compactionPart is the part of each table's compaction this process
// takes: --part of --parts, --part defaulting to JOB_COMPLETION_INDEX.
func (f jobFlags) compactionPart() (engine.Part, error) {
	part := f.part
	if v := f.jobIndex; !f.partSet && v != "" && f.parts > 1 {
		n, err := strconv.Atoi(v)
		if err != nil {
			return engine.Part{}, fmt.Errorf("JOB_COMPLETION_INDEX=%q: want the pod's index, from 0", v)
		}
		part = n
	}
	if part >= f.parts {
		return engine.Part{}, fmt.Errorf("--part %d: want 0 to %d, one less than --parts %d", part, f.parts-1, f.parts)
	}
	return engine.Part{Index: part, Of: f.parts}, nil
}

// neverIfZero is a --retire-shards-after value as engine.GCPolicy
// takes it: 0 on the command line means never.
func neverIfZero(d time.Duration) time.Duration {
	if d == 0 {
		return -1
	}
	return d
}
