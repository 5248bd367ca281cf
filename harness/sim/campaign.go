package sim

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"
)

// CampaignConfig runs many seeds.
type CampaignConfig struct {
	Start uint64 // first seed
	Seeds int    // how many (0: until Duration ends)
	Steps int    // per seed (see Config)
	// Duration bounds the campaign's wall time (0: none).
	Duration time.Duration
	// Parallel runs that many seeds at once (default 1). Seeds are
	// independent; each still replays alone.
	Parallel int
	// Progress, if set, is called after each seed.
	Progress func(Totals)
	// SeedLimit: a seed still running after this long is a liveness
	// violation (default 2 minutes).
	SeedLimit time.Duration
}

func (c CampaignConfig) limit() time.Duration {
	if c.SeedLimit > 0 {
		return c.SeedLimit
	}
	return 2 * time.Minute
}

// runWatched runs one seed, and reports a liveness violation, with the
// trace so far, if it has not finished within limit (a seed takes well
// under a second). The seed's goroutines are left behind: a process that
// reports this should stop.
func runWatched(ctx context.Context, cfg Config, limit time.Duration) (Report, error) {
	var mu sync.Mutex
	var trace []string
	cfg.Trace = func(line string) {
		mu.Lock()
		trace = append(trace, line)
		mu.Unlock()
	}
	type result struct {
		rep Report
		err error
	}
	done := make(chan result, 1)
	rctx, cancel := context.WithCancel(ctx)
	go func() {
		rep, err := Run(rctx, cfg)
		done <- result{rep, err}
	}()
	timer := time.NewTimer(limit)
	defer timer.Stop()
	select {
	case r := <-done:
		cancel()
		return r.rep, r.err
	case <-timer.C:
		mu.Lock()
		lines := append([]string(nil), trace...)
		mu.Unlock()
		cancel() // an operation that honours its context may yet end
		return Report{Seed: cfg.Seed, Trace: lines}, &Violation{Seed: cfg.Seed, Oracle: "liveness",
			Detail: fmt.Sprintf("the seed did not finish within %v", limit), Trace: lines}
	}
}

// Totals add up the reports of a campaign.
type Totals struct {
	Seeds, Operations   int
	Ops, Faults         map[string]int
	Preemptions, Stalls int
	ListOmissions       int64
	RowsAcked           int
	RowsChecked         int64
	History             int
	Elapsed             time.Duration
	// Failed is the first violation, by seed order among those run.
	Failed *Violation
}

func (t Totals) String() string {
	return fmt.Sprintf("%d seeds, %d operations (%s); faults injected: %s; %d suspensions, %d stalls past GC, %d keys left out of listings; %d rows acknowledged, %d rows read back and checked; %d operations checked for linearizability; %v",
		t.Seeds, t.Operations, counts(t.Ops), counts(t.Faults), t.Preemptions, t.Stalls, t.ListOmissions, t.RowsAcked, t.RowsChecked, t.History, t.Elapsed.Round(time.Millisecond))
}

func counts(m map[string]int) string {
	var b strings.Builder
	for i, k := range slices.Sorted(maps.Keys(m)) {
		if i > 0 {
			b.WriteString(" ")
		}
		fmt.Fprintf(&b, "%s=%d", k, m[k])
	}
	return b.String()
}

// Campaign runs seeds Start, Start+1, … and stops at the first violation
// (or when the seeds or the time run out). An error other than a violation
// means the harness itself failed on a seed.
func Campaign(ctx context.Context, c CampaignConfig) (Totals, error) {
	t := Totals{Ops: map[string]int{}, Faults: map[string]int{}}
	began := time.Now()
	if c.Parallel <= 0 {
		c.Parallel = 1
	}
	var mu sync.Mutex
	var harness error
	next := c.Start
	more := func() (uint64, bool) {
		mu.Lock()
		defer mu.Unlock()
		if t.Failed != nil || harness != nil || ctx.Err() != nil ||
			(c.Seeds > 0 && next >= c.Start+uint64(c.Seeds)) ||
			(c.Duration > 0 && time.Since(began) > c.Duration) ||
			(c.Seeds <= 0 && c.Duration <= 0) {
			return 0, false
		}
		next++
		return next - 1, true
	}
	var wg sync.WaitGroup
	for range c.Parallel {
		wg.Go(func() {
			for seed, ok := more(); ok; seed, ok = more() {
				rep, err := runWatched(ctx, Config{Seed: seed, Steps: c.Steps}, c.limit())
				if ctx.Err() != nil {
					return // interrupted: this seed's outcome means nothing
				}
				mu.Lock()
				t.Seeds++
				for k, v := range rep.Ops {
					t.Ops[k] += v
					t.Operations += v
				}
				for k, v := range rep.Faults {
					t.Faults[k] += v
				}
				t.Preemptions += rep.Preemptions
				t.Stalls += rep.Stalls
				t.ListOmissions += rep.ListOmissions
				t.RowsAcked += rep.RowsAcked
				t.RowsChecked += rep.RowsChecked
				t.History += rep.History
				var v *Violation
				switch {
				case errors.As(err, &v):
					if t.Failed == nil || v.Seed < t.Failed.Seed {
						t.Failed = v
					}
				case err != nil && harness == nil:
					harness = fmt.Errorf("seed %d: %w", seed, err)
				}
				t.Elapsed = time.Since(began)
				if c.Progress != nil {
					c.Progress(t)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	t.Elapsed = time.Since(began)
	return t, harness
}
