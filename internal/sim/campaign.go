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
				rctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
				rep, err := Run(rctx, Config{Seed: seed, Steps: c.Steps})
				cancel()
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
