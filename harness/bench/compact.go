package bench

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/engine"
	"github.com/stratadb/strata/table"
)

// openEngine opens the table in b as the phases that compact it do.
func openEngine(ctx context.Context, b blob.Bucket) (*engine.DB, error) {
	return engine.Open(ctx, b, &engine.Options{Writer: "bench", Log: slog.New(slog.DiscardHandler)})
}

// compactPolicy is the phases' compaction: fragments of at most
// --target-rows rows, due from two.
func (cfg Config) compactPolicy() *engine.Policy {
	return &engine.Policy{TargetRows: int64(cfg.TargetRows), MinFragments: 2}
}

// compact compacts the table to fragments of at most --target-rows rows.
func compact(ctx context.Context, cfg Config, u string) (Result, error) {
	b, err := cfg.open(ctx, u)
	if err != nil {
		return nil, err
	}
	defer b.Close()
	db, err := openEngine(ctx, b)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	// The figure is the compaction's own time: taking the lease before it
	// and recording the run after it are left out, as the systems it is
	// set beside do neither.
	info, err := db.Compact(ctx, engine.CompactOptions{Policy: cfg.compactPolicy()})
	res, wall := info.Result, info.Duration
	if err != nil {
		return nil, err
	}
	if res.RowsAfter != res.RowsBefore {
		return nil, fmt.Errorf("compaction changed the row count: %d before, %d after", res.RowsBefore, res.RowsAfter)
	}
	return Result{"wall_s": round(wall.Seconds()), "fragments_before": res.FragmentsBefore, "fragments_after": res.FragmentsAfter,
		"rows_before": res.RowsBefore, "rows_after": res.RowsAfter}, nil
}

// concurrent runs two more writers (workers W and W+1) while a compactor
// compacts back to back until both are done, then checks every id.
func concurrent(ctx context.Context, cfg Config, u string) (Result, error) {
	b, err := cfg.open(ctx, u)
	if err != nil {
		return nil, err
	}
	defer b.Close()
	before, err := table.Open(ctx, b, nil)
	if err != nil {
		return nil, err
	}
	rowsBefore := before.Manifest().Rows()
	db, err := openEngine(ctx, b)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	batches := generate(cfg, cfg.Writers, cfg.ConcWriters, cfg.ConcCommits)
	defer release(batches)
	var mu sync.Mutex
	var lat []time.Duration
	errs := make([]error, cfg.ConcWriters)
	done := make(chan struct{})
	start := time.Now()
	var wg sync.WaitGroup
	for i := range cfg.ConcWriters {
		wg.Go(func() {
			errs[i] = func() error {
				wb, err := cfg.open(ctx, u)
				if err != nil {
					return err
				}
				defer wb.Close()
				db, err := engine.OpenNew(wb, &engine.Options{Log: slog.New(slog.DiscardHandler)})
				if err != nil {
					return err
				}
				defer db.Close()
				for _, rec := range batches[i] {
					t0 := time.Now()
					if _, err := db.Append(ctx, engine.AppendOptions{}, rec); err != nil {
						return err
					}
					mu.Lock()
					lat = append(lat, time.Since(t0))
					mu.Unlock()
				}
				return nil
			}()
		})
	}
	var compactErr error
	runs := 0
	var cwg sync.WaitGroup
	cwg.Go(func() {
		for {
			select {
			case <-done:
				return
			default:
			}
			if _, err := db.Compact(ctx, engine.CompactOptions{Policy: cfg.compactPolicy()}); err != nil {
				compactErr = err
				return
			}
			runs++
		}
	})
	wg.Wait()
	close(done)
	cwg.Wait()
	wall := time.Since(start)
	if err := errors.Join(append(errs, compactErr)...); err != nil {
		return nil, err
	}
	s, err := table.Open(ctx, b, nil)
	if err != nil {
		return nil, err
	}
	ids := map[int64]int{}
	var rows int64
	for rec, err := range s.Scan(ctx, table.ScanOptions{Columns: []string{"id"}}) {
		if err != nil {
			return nil, err
		}
		for _, id := range rec.Column(0).(*array.Int64).Int64Values() {
			ids[id]++
		}
		rows += rec.NumRows()
	}
	want := rowsBefore + int64(cfg.ConcWriters*cfg.ConcCommits*cfg.Rows)
	ok := rows == want && int64(len(ids)) == want
	slices.Sort(lat)
	r := Result{"wall_s": round(wall.Seconds()), "p50_ms": ms(pct(lat, 0.5)), "p99_ms": ms(pct(lat, 0.99)),
		"rows": rows, "distinct_ids": len(ids), "ok": ok, "compactions": runs}
	if !ok {
		return r, fmt.Errorf("concurrent: %d rows, %d distinct ids; want %d", rows, len(ids), want)
	}
	return r, nil
}
