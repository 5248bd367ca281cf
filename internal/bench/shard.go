package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"time"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/commit"
	"github.com/stratadb/strata/internal/rollouts"
	"github.com/stratadb/strata/table"
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
				if _, err := s.Flush(ctx); err != nil {
					return err
				}
				for {
					res, err := s.Merge(ctx)
					if errors.Is(err, walshard.ErrMergeRunning) {
						time.Sleep(2 * time.Millisecond)
						continue
					}
					if err != nil {
						return err
					}
					if st := s.Stats(); st.PendingGenerations == 0 && res.Generations == 0 {
						break
					}
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
	s, err := table.Open(ctx, b, nil)
	if err != nil {
		return nil, err
	}
	rows := cfg.Writers * cfg.Commits * cfg.Rows
	if got := s.Manifest().Rows(); got != int64(rows) {
		return nil, fmt.Errorf("table holds %d rows, want %d", got, rows)
	}
	slices.Sort(lat)
	logical := int64(rows) * rollouts.RowBytes
	mb := float64(logical) / 1e6
	return Result{
		"rows": rows, "logical_bytes": logical, "wall_s": round(wall.Seconds()),
		"rows_per_s": round(float64(rows) / wall.Seconds()), "mb_per_s": round(mb / wall.Seconds()),
		"p50_ms": ms(pct(lat, 0.50)), "p99_ms": ms(pct(lat, 0.99)), "max_ms": ms(lat[len(lat)-1]),
		"conflicts": 0, "versions": s.Version(), "fragments": len(s.Manifest().Fragments),
		"requests": requests.Requests(), "requests_per_mb": round(float64(requests.Requests()) / mb),
		"put_requests_per_mb": round(float64(requests.Puts+requests.CondPutsWon+requests.CondPutsLost+requests.CondPutsErr) / mb),
	}, nil
}

func addStats(a, b blob.Stats) blob.Stats {
	return blob.Stats{Gets: a.Gets + b.Gets, RangeGets: a.RangeGets + b.RangeGets, Puts: a.Puts + b.Puts,
		CondPutsWon: a.CondPutsWon + b.CondPutsWon, CondPutsLost: a.CondPutsLost + b.CondPutsLost,
		CondPutsErr: a.CondPutsErr + b.CondPutsErr, Lists: a.Lists + b.Lists, Deletes: a.Deletes + b.Deletes,
		Heads: a.Heads + b.Heads, BytesIn: a.BytesIn + b.BytesIn, BytesOut: a.BytesOut + b.BytesOut}
}
