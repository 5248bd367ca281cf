package walshard_test

import (
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/blob/fault"
	"github.com/stratadb/strata/commit"
	"github.com/stratadb/strata/harness/testenv"
	"github.com/stratadb/strata/table/format"
	"github.com/stratadb/strata/walshard"
)

// BenchmarkShardUpsertTenPercentByKey: a table of 100,000 rows in ten
// fragments, with a key index on id; each op upserts 10,000 of them
// (every tenth id) through a shard — acknowledged from the WAL, then
// drained: flushed and merged, the merge replacing the rows by key —
// through a store whose every request takes 20-30 ms. "append" appends
// and drains 10,000 rows the same way, the yardstick. It reports
// requests per op, and the time to the acknowledgement.
func BenchmarkShardUpsertTenPercentByKey(b *testing.B) {
	const rows, frags = 100_000, 10
	sc := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}, {Name: "reward", Type: arrow.PrimitiveTypes.Float64}}, nil)
	batch := func(n int, every int64, reward float64) arrow.RecordBatch {
		bld := array.NewRecordBuilder(testenv.Arrow, sc)
		defer bld.Release()
		for i := range n {
			bld.Field(0).(*array.Int64Builder).Append(int64(i) * every)
			bld.Field(1).(*array.Float64Builder).Append(reward)
		}
		return bld.NewRecordBatch()
	}
	setup := func(b *testing.B) (*blob.Counted, *walshard.Shard) {
		under, err := blob.Open(ctx, "mem://")
		if err != nil {
			b.Fatal(err)
		}
		if _, err := commit.Create(ctx, under, sc, nil, nil); err != nil {
			b.Fatal(err)
		}
		tb, err := commit.OpenTable(ctx, under, nil)
		if err != nil {
			b.Fatal(err)
		}
		for f := range frags {
			bld := array.NewRecordBuilder(testenv.Arrow, sc)
			for i := range rows / frags {
				bld.Field(0).(*array.Int64Builder).Append(int64(f*rows/frags + i))
				bld.Field(1).(*array.Float64Builder).Append(0)
			}
			rec := bld.NewRecordBatch()
			bld.Release()
			if _, err := tb.Append(ctx, rec); err != nil {
				b.Fatal(err)
			}
			rec.Release()
		}
		if _, err := tb.CreateIndex(ctx, "id"); err != nil {
			b.Fatal(err)
		}
		counted := blob.NewCounted(fault.Wrap(under, fault.Latency(1, 20*time.Millisecond, 30*time.Millisecond)))
		s, err := walshard.Open(ctx, counted, &walshard.Options{Shard: "bench"})
		if err != nil {
			b.Fatal(err)
		}
		return counted, s
	}
	for _, upsert := range []bool{true, false} {
		name := "append"
		if upsert {
			name = "upsert"
		}
		b.Run(name, func(b *testing.B) {
			c, s := setup(b)
			defer s.Close()
			before := c.Stats().Requests()
			var acked time.Duration
			b.ResetTimer()
			for i := range b.N {
				var rec arrow.RecordBatch
				start := time.Now()
				var err error
				if upsert {
					rec = batch(rows/10, 10, float64(i+1))
					err = s.Upsert(ctx, []string{"id"}, rec)
				} else {
					rec = batch(rows/10, 1, float64(i+1))
					err = s.Append(ctx, rec)
				}
				acked += time.Since(start)
				rec.Release()
				if err != nil {
					b.Fatal(err)
				}
				if err := s.Drain(ctx); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(c.Stats().Requests()-before)/float64(b.N), "requests/op")
			b.ReportMetric(float64(acked.Milliseconds())/float64(b.N), "ms-to-ack/op")
		})
	}
}

// BenchmarkShardNamedUpsertsOfOneKey: named upserts (as every upsert sent
// through the server is) flushed and merged together, of one hot key and
// of keys all different. A named upsert leaves the rows of its key before
// it in the generation (a merge that drops it as a copy another shard
// stored must find them): the hot key's generation holds every row, and
// its merge copies the last; it costs the requests the distinct keys do.
func BenchmarkShardNamedUpsertsOfOneKey(b *testing.B) {
	sc := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}, {Name: "reward", Type: arrow.PrimitiveTypes.Float64}}, nil)
	const upserts = 100
	for _, hot := range []bool{true, false} {
		name := "distinct keys"
		if hot {
			name = "one key"
		}
		b.Run(name, func(b *testing.B) {
			var requests int64
			var took time.Duration
			for i := range b.N {
				under, err := blob.Open(ctx, "mem://")
				if err != nil {
					b.Fatal(err)
				}
				if _, err := commit.Create(ctx, under, sc, nil, nil); err != nil {
					b.Fatal(err)
				}
				counted := blob.NewCounted(under)
				s, err := walshard.Open(ctx, counted, &walshard.Options{Shard: "bench", FlushInterval: time.Hour, MergeInterval: time.Hour})
				if err != nil {
					b.Fatal(err)
				}
				for u := range upserts {
					bld := array.NewRecordBuilder(testenv.Arrow, sc)
					key := int64(u)
					if hot {
						key = 1
					}
					bld.Field(0).(*array.Int64Builder).Append(key)
					bld.Field(1).(*array.Float64Builder).Append(float64(u))
					rec := bld.NewRecordBatch()
					bld.Release()
					name := format.Idempotency{Producer: "client", Seq: uint64(i*upserts + u + 1)}
					if _, err := s.UpsertOnce(ctx, &name, []string{"id"}, false, rec); err != nil {
						b.Fatal(err)
					}
					rec.Release()
				}
				before := counted.Stats().Requests()
				start := time.Now()
				if err := s.Drain(ctx); err != nil {
					b.Fatal(err)
				}
				took += time.Since(start)
				requests += counted.Stats().Requests() - before
				s.Close()
			}
			b.ReportMetric(float64(requests)/float64(b.N), "drain-requests")
			b.ReportMetric(float64(took.Milliseconds())/float64(b.N), "drain-ms")
		})
	}
}
