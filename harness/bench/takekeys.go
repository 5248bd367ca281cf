package bench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"golang.org/x/sync/errgroup"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/engine"
	"github.com/stratadb/strata/table"
	"github.com/stratadb/strata/table/value"
)

// The take-keys phase: takeKeys keys a take, takeRounds takes.
const (
	takeKeys   = 100
	takeRounds = 20
)

// takeSchema is the take-keys table's: a row found by its UUID.
var takeSchema = arrow.NewSchema([]arrow.Field{
	{Name: "id", Type: arrow.BinaryTypes.String},
	{Name: "step", Type: arrow.PrimitiveTypes.Int64},
	{Name: "reward", Type: arrow.PrimitiveTypes.Float64},
}, nil)

// uuidAt is row i's id: a version-4 UUID drawn from the seed and i.
func uuidAt(seed uint32, i int64) string {
	r := rand.New(rand.NewPCG(uint64(seed), uint64(i)))
	hi, lo := r.Uint64(), r.Uint64()
	hi = hi&^0xf000 | 0x4000     // version 4
	lo = lo&^(3<<62) | (1 << 63) // variant 10
	return fmt.Sprintf("%08x-%04x-%04x-%04x-%012x", hi>>32, hi>>16&0xffff, hi&0xffff, lo>>48, lo&0xffffffffffff)
}

// takeKeysPhase builds a table of cfg.TakeRows rows keyed by UUID in
// cfg.TakeFragments fragments (appended by eight writers at once, a
// fragment an append) and the key index of its id, then times takeRounds
// takes of takeKeys random keys it holds, each from the table opened
// afresh (its open not timed), counting each take's requests and bytes
// read. The first take reads the index's directory, which the process
// keeps (first_ms, first_requests); the others do not.
func takeKeysPhase(ctx context.Context, cfg Config, u string, log io.Writer) (Result, error) {
	b, err := cfg.open(ctx, sideURL(u, "-take"))
	if err != nil {
		return nil, err
	}
	defer b.Close()
	if _, _, err := engine.Create(ctx, b, takeSchema, "bench", nil); err != nil {
		return nil, err
	}
	start := time.Now()
	per := cfg.TakeRows / int64(cfg.TakeFragments)
	next := make(chan int, cfg.TakeFragments)
	for f := range cfg.TakeFragments {
		next <- f
	}
	close(next)
	g, gctx := errgroup.WithContext(ctx)
	for w := range 8 {
		g.Go(func() error {
			db, err := engine.OpenNew(b, &engine.Options{Writer: fmt.Sprintf("take%d", w), Log: slog.New(slog.DiscardHandler)})
			if err != nil {
				return err
			}
			defer db.Close()
			for f := range next {
				lo, hi := int64(f)*per, int64(f+1)*per
				if f == cfg.TakeFragments-1 {
					hi = cfg.TakeRows
				}
				rec := takeRows(cfg.Seed, lo, hi)
				_, err := db.Append(gctx, engine.AppendOptions{}, rec)
				rec.Release()
				if err != nil {
					return err
				}
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	build := time.Since(start)
	fmt.Fprintf(log, "bench: take-keys: %d rows in %d fragments written in %.1f s\n", cfg.TakeRows, cfg.TakeFragments, build.Seconds())
	start = time.Now()
	db, err := engine.OpenNew(b, &engine.Options{Writer: "take-index", Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		return nil, err
	}
	_, err = db.CreateIndex(ctx, "id")
	db.Close()
	if err != nil {
		return nil, err
	}
	indexed := time.Since(start)
	fmt.Fprintf(log, "bench: take-keys: the key index of id built in %.1f s\n", indexed.Seconds())
	counted := blob.NewCounted(b)
	r := rand.New(rand.NewPCG(uint64(cfg.Seed), 57))
	var lat []time.Duration
	var requests, bytesRead []int64
	for range takeRounds {
		keys := make([]value.Value, 0, takeKeys)
		for picked := map[int64]bool{}; len(keys) < takeKeys; {
			if i := r.Int64N(cfg.TakeRows); !picked[i] {
				picked[i] = true
				keys = append(keys, value.String(uuidAt(cfg.Seed, i)))
			}
		}
		s, err := table.Open(ctx, counted, nil)
		if err != nil {
			return nil, err
		}
		before := counted.Stats()
		t0 := time.Now()
		recs, _, err := s.Take(ctx, "id", keys, nil)
		lat = append(lat, time.Since(t0))
		if err != nil {
			return nil, err
		}
		d := counted.Stats().Sub(before)
		requests, bytesRead = append(requests, d.Gets+d.RangeGets+d.Lists+d.Heads), append(bytesRead, d.BytesIn)
		var rows int64
		for _, rec := range recs {
			rows += rec.NumRows()
			rec.Release()
		}
		if rows != takeKeys {
			return nil, fmt.Errorf("take-keys: a take of %d keys the table holds found %d rows", takeKeys, rows)
		}
	}
	first, firstRequests := lat[0], requests[0]
	slices.Sort(lat)
	slices.Sort(requests)
	slices.Sort(bytesRead)
	return Result{"rows": cfg.TakeRows, "fragments": cfg.TakeFragments, "keys": takeKeys, "takes": takeRounds,
		"build_s": round(build.Seconds()), "index_s": round(indexed.Seconds()), "first_ms": ms(first), "first_requests": firstRequests, "p50_ms": ms(pct(lat, 0.50)), "p99_ms": ms(pct(lat, 0.99)),
		"requests": requests[len(requests)/2], "bytes_read": bytesRead[len(bytesRead)/2]}, nil
}

// takeRows is the take-keys table's rows lo … hi-1.
func takeRows(seed uint32, lo, hi int64) arrow.RecordBatch {
	bld := array.NewRecordBuilder(memory.DefaultAllocator, takeSchema)
	defer bld.Release()
	ids, steps, rewards := bld.Field(0).(*array.StringBuilder), bld.Field(1).(*array.Int64Builder), bld.Field(2).(*array.Float64Builder)
	for i := lo; i < hi; i++ {
		ids.Append(uuidAt(seed, i))
		steps.Append(i)
		rewards.Append(float64(i%1000) / 1000)
	}
	return bld.NewRecordBatch()
}
