// Command strata-sim runs long campaigns of Strata's seeded fault
// simulation (harness/sim): many actors on one table while the object
// store fails, lags and stalls, with oracles for lost, doubled and phantom
// rows, pinned versions, manifests and linearizability.
//
//	strata-sim -duration 30m -parallel 2          # seeds from 1 until time is up
//	strata-sim -start 5000 -seeds 10000 -steps 200
//	strata-sim -seed 1379 -trace                  # replay one seed, every step
//
// It exits 0 when every seed passed, 1 on a violation (printing the seed,
// the oracle and the operations that led there), 2 on bad flags.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"time"

	"github.com/stratadb/strata/harness/sim"
)

func main() {
	var (
		start    = flag.Uint64("start", 1, "first seed")
		seeds    = flag.Int("seeds", 0, "seeds to run (0: until -duration ends)")
		steps    = flag.Int("steps", 100, "top-level operations per seed")
		duration = flag.Duration("duration", 0, "stop starting seeds after this long (0: no limit)")
		parallel = flag.Int("parallel", 1, "seeds run at once")
		seed     = flag.Uint64("seed", 0, "replay this one seed (with -trace, print every step)")
		trace    = flag.Bool("trace", false, "with -seed: print the trace as it runs")
		lines    = flag.Int("lines", 120, "trace lines printed for a failing seed")
	)
	flag.Usage = func() {
		fmt.Fprintf(os.Stderr, "usage: strata-sim [flags]\n\nRuns seeded fault-simulation campaigns on Strata's engine.\n\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() > 0 || *parallel < 1 || *steps < 1 {
		flag.Usage()
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()

	if *seed != 0 {
		cfg := sim.Config{Seed: *seed, Steps: *steps}
		if *trace {
			cfg.Trace = func(line string) { fmt.Println(line) }
		}
		rep, err := sim.Run(ctx, cfg)
		if err != nil {
			fail(err, rep.Trace, *lines, *steps)
		}
		fmt.Printf("seed %d passed: %s; %d operations, faults %v, %d rows acknowledged\n", *seed, rep.Setup, sum(rep.Ops), rep.Faults, rep.RowsAcked)
		return
	}
	if *seeds == 0 && *duration == 0 {
		*seeds = 1000
	}
	last := time.Now()
	t, err := sim.Campaign(ctx, sim.CampaignConfig{Start: *start, Seeds: *seeds, Steps: *steps, Duration: *duration, Parallel: *parallel,
		Progress: func(t sim.Totals) {
			if time.Since(last) > 10*time.Second {
				last = time.Now()
				fmt.Printf("%d seeds, %d operations, %d rows checked, %v\n", t.Seeds, t.Operations, t.RowsChecked, t.Elapsed.Round(time.Second))
			}
		}})
	fmt.Println(t)
	if ctx.Err() != nil && t.Failed == nil {
		fmt.Fprintln(os.Stderr, "strata-sim: interrupted")
		os.Exit(130)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "strata-sim:", err)
		os.Exit(1)
	}
	if t.Failed != nil {
		fail(t.Failed, t.Failed.Trace, *lines, *steps)
	}
}

func fail(err error, trace []string, lines, steps int) {
	if len(trace) > lines {
		fmt.Printf("… %d earlier lines\n", len(trace)-lines)
		trace = trace[len(trace)-lines:]
	}
	fmt.Println(strings.Join(trace, "\n"))
	fmt.Fprintln(os.Stderr, "strata-sim: VIOLATION", err)
	if v, ok := err.(*sim.Violation); ok {
		fmt.Fprintf(os.Stderr, "replay: go run ./cmd/strata-sim -seed %d -steps %d -trace\n", v.Seed, steps)
	}
	os.Exit(1)
}

func sum(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}
