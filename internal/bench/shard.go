package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/commit"
	"github.com/stratadb/strata/internal/rollouts"
	"github.com/stratadb/strata/walshard"
)

// ingestShards is the ingest phase with each writer on its own shard:
// every append is acknowledged once durable in the shard's WAL; merges run
// in the background; each writer's final flush and merge is timed.
func ingestShards(ctx context.Context, cfg Config, u string, log io.Writer) (Result, error) {
	b, err := blob.Open(ctx, u)
	if err != nil {
		return nil, err
	}
	defer b.Close()
	if _, err := commit.Create(ctx, b, rollouts.Schema, nil, nil); err != nil {
		return nil, err
	}
	batches := generate(cfg, 0, cfg.Writers, cfg.Commits)
	defer release(batches)
	var mu sync.Mutex
	var lat []time.Duration
	var requests blob.Stats
	errs := make([]error, cfg.Writers)
	start := time.Now()
	var wg sync.WaitGroup
	for w := range cfg.Writers {
		wg.Go(func() {
			errs[w] = func() error {
				wb, err := blob.Open(ctx, u)
				if err != nil {
					return err
				}
				defer wb.Close()
				s, err := walshard.Open(ctx, wb, walshard.Options{Shard: fmt.Sprintf("w%02d", w),
					FlushBytes: 16 << 20, MergeInterval: 200 * time.Millisecond})
				if err != nil {
					return err
				}
				defer s.Close()
				for _, rec := range batches[w] {
					t0 := time.Now()
					if err := s.Append(ctx, rec); err != nil {
						return err
					}
					d := time.Since(t0)
					mu.Lock()
					lat = append(lat, d)
					mu.Unlock()
				}
				if err := s.Drain(ctx); err != nil {
					return err
				}
				st, _ := blob.StatsOf(wb)
				mu.Lock()
				requests = addStats(requests, st)
				mu.Unlock()
				return nil
			}()
		})
	}
	wg.Wait()
	wall := time.Since(start)
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	r, err := ingestResult(ctx, b, cfg, wall, lat)
	if err != nil {
		return nil, err
	}
	mb := float64(r["logical_bytes"].(int64)) / 1e6
	r["conflicts"] = 0
	r["requests"] = requests.Requests()
	r["requests_per_mb"] = round(float64(requests.Requests()) / mb)
	r["put_requests_per_mb"] = round(float64(requests.Puts+requests.CondPutsWon+requests.CondPutsLost+requests.CondPutsErr) / mb)
	return r, nil
}

func addStats(a, b blob.Stats) blob.Stats {
	return blob.Stats{Gets: a.Gets + b.Gets, RangeGets: a.RangeGets + b.RangeGets, Puts: a.Puts + b.Puts,
		CondPutsWon: a.CondPutsWon + b.CondPutsWon, CondPutsLost: a.CondPutsLost + b.CondPutsLost,
		CondPutsErr: a.CondPutsErr + b.CondPutsErr, Lists: a.Lists + b.Lists, Deletes: a.Deletes + b.Deletes,
		Heads: a.Heads + b.Heads, BytesIn: a.BytesIn + b.BytesIn, BytesOut: a.BytesOut + b.BytesOut}
}
