package command

import (
	"math"
	"os"
	"runtime/pprof"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/stratadb/strata/engine"
	"github.com/stratadb/strata/harness/bench"
	"github.com/stratadb/strata/internal/cli"
)

func newBench(env *Env) *cobra.Command {
	cfg := bench.Config{}
	var phases string
	var seed uint
	var cpuprofile string
	c := &cobra.Command{
		Use:   "bench",
		Short: "Run the rollouts benchmark workload and print one JSON line per phase",
		Long: `bench runs the rollouts workload (docs/benchmark.md): W writers, each
opening the table on its own, make C commits of R rows; then full, projected
and filtered scans. Results go to stdout as JSON lines, progress to stderr.
The exit status is non-zero when a check fails (a row count). With
STRATA_BENCH_TRACE=1 set, commits slower than 100ms are logged with their
attempts and rebases, and the ingest's requests to the store by kind.

Phases: ingest, scan-before, compact, scan-after, concurrent. Two more
run only when named: take-keys (100 random UUID keys taken from a table
of its own, --take-rows rows in --take-fragments fragments; p50_ms,
p99_ms, requests) and clustered-filter (a filter matching 1% of the rows,
reward < 0.01, read with every column before and after the table the
phases before it built is given the cluster key reward and compacted:
wall_s, requests, bytes_read against table_bytes, before_… before).

--mode=fleet runs --writers shard writers for --duration, each appending
--rows rows (default 20) every --append-every and flushing on its own, while
the compactor Job fleet-merges and compacts every --merge-interval; then it
drains and checks that every acknowledged row is in the table once, and
prints one line: rows_acked, rows_visible, merge_failures, ack and
visibility latencies, commits_per_min, conflicts, and the cost model:
requests_per_shard_min, in all and by kind (_put, _get, _list, _delete), and
s3_usd_per_month_requests and _storage, what the run's rate of requests and
of stored rows would cost on S3 Standard for a month at its list prices
(docs/operations.md). S3 credentials come from AWS_ACCESS_KEY_ID,
AWS_SECRET_ACCESS_KEY and AWS_REGION.`,
		Example: `  strata bench
  strata bench --store=file --dir=/tmp/t --writers=4 --commits=50 --rows=200
  strata bench --store=s3 --s3-endpoint=http://127.0.0.1:9000 --s3-bucket=strata
  strata bench --mode=shard --store-latency=20ms --phases=ingest
  strata bench --mode=fleet --writers=1000 --duration=60s --merge-interval=5s --store-latency=20ms`,
		Args: ExactArgs(0),
		RunE: func(c *cobra.Command, args []string) error {
			cfg.Seed = uint32(seed)
			if cpuprofile != "" {
				f, err := os.Create(cpuprofile)
				if err != nil {
					return err
				}
				defer f.Close()
				if err := pprof.StartCPUProfile(f); err != nil {
					return err
				}
				defer pprof.StopCPUProfile()
			}
			if phases != "" {
				cfg.Phases = strings.Split(phases, ",")
			}
			if cfg.Mode == "fleet" && !c.Flags().Changed("rows") {
				cfg.Rows = 20
			}
			cfg.ReuseBytes = ReuseBytes(cfg.ReuseBytes)
			return bench.Run(c.Context(), cfg, env.Out, env.Err)
		},
	}
	f := c.Flags()
	f.IntVar(&cfg.Writers, "writers", 4, "concurrent writers")
	f.IntVar(&cfg.Commits, "commits", 50, "commits per writer")
	f.IntVar(&cfg.Rows, "rows", 200, "rows per commit")
	f.IntVar(&cfg.TargetRows, "target-rows", 1_000_000, "compaction target rows per fragment")
	f.UintVar(&seed, "seed", 42, "data generator seed")
	f.StringVar(&phases, "phases", "", "comma-separated phases: ingest, scan-before, compact, scan-after, concurrent (the default: all of them); take-keys and clustered-filter run only when named")
	f.StringVar(&cfg.Store, "store", "file", "file or s3")
	f.StringVar(&cfg.Dir, "dir", "", "local folder for --store=file (default: a fresh temp folder, removed afterwards)")
	f.StringVar(&cfg.S3Endpoint, "s3-endpoint", "", "S3 endpoint, e.g. http://127.0.0.1:9000")
	f.StringVar(&cfg.S3Bucket, "s3-bucket", "", "S3 bucket (must exist)")
	f.StringVar(&cfg.S3Prefix, "s3-prefix", "", "S3 prefix (default: a fresh one)")
	f.IntVar(&cfg.ConcWriters, "conc-writers", 2, "writers in the concurrent phase")
	f.IntVar(&cfg.ConcCommits, "conc-commits", 20, "commits per writer in the concurrent phase")
	f.StringVar(&cfg.Mode, "mode", "direct", "direct (one commit per batch), shard (each writer appends through its own WAL shard) or fleet (many shard writers for --duration, merged by the compactor Job)")
	f.DurationVar(&cfg.Duration, "duration", time.Minute, "fleet: how long the writers append")
	f.DurationVar(&cfg.AppendEvery, "append-every", time.Second, "fleet: each writer's pause between appends")
	f.DurationVar(&cfg.MergeInterval, "merge-interval", 5*time.Second, "fleet: the compactor Job's pass interval (fleet merge, then compaction when due)")
	f.DurationVar(&cfg.FlushInterval, "flush-interval", 0, "fleet: the writers' flush interval (default 1.2 merge intervals)")
	f.StringVar(&cpuprofile, "cpuprofile", "", "write a CPU profile to this file")
	f.BoolVar(&cfg.Keys, "keys", true, "name each ingest append (producer and sequence number), as the clients do by default")
	f.Int64Var(&cfg.ReuseBytes, "reuse-bytes", engine.DefaultReuseBytes, "shard: the writers' ReuseBytes: WAL entries of at least this many bytes join the table as they are (0: off)")
	f.Int64Var(&cfg.TakeRows, "take-rows", 10_000_000, "take-keys: rows of the table keyed by UUID")
	f.IntVar(&cfg.TakeFragments, "take-fragments", 1_000, "take-keys: fragments it is written in")
	f.DurationVar(&cfg.StoreLatency, "store-latency", 0, "delay every request by this to 1.5× it, as a remote store's round trip would (e.g. 20ms)")
	AtLeast(c, 1, "writers", "commits", "rows", "target-rows", "conc-writers", "conc-commits", "take-rows", "take-fragments")
	AtLeast(c, int64(time.Millisecond), "duration", "merge-interval")
	AtLeast(c, 0, "append-every", "flush-interval", "reuse-bytes", "store-latency")
	cli.Bound(f, "seed", 0, math.MaxUint32)
	return c
}
