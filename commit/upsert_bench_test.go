package commit_test

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/blob/fault"
	"github.com/stratadb/strata/commit"
)

// BenchmarkUpsertTenPercentByKey: a table of 100,000 rows in ten
// fragments; each op upserts 10,000 of them (every tenth id: a new
// reward), through a store whose every request takes 20-30 ms, with and
// without a key index on id; "append" appends 10,000 rows the same way,
// the yardstick. It reports requests per op.
func BenchmarkUpsertTenPercentByKey(b *testing.B) {
	const rows, frags = 100_000, 10
	setup := func(b *testing.B, indexed bool) (*blob.Counted, *commit.Table) {
		under := open(b, "mem://")
		tb := newKVTable(b, under)
		for f := range frags {
			rs := make([]kv, rows/frags)
			for i := range rs {
				rs[i] = kv{int64(f*rows/frags + i), "run", 0}
			}
			rec := kvBatch(rs...)
			if _, err := tb.Append(ctx, rec); err != nil {
				b.Fatal(err)
			}
			rec.Release()
		}
		if indexed {
			if _, err := tb.CreateIndex(ctx, "id"); err != nil {
				b.Fatal(err)
			}
		}
		counted := blob.NewCounted(fault.Wrap(under, fault.Latency(1, 20*time.Millisecond, 30*time.Millisecond)))
		slow, err := commit.OpenTable(ctx, counted, nil)
		if err != nil {
			b.Fatal(err)
		}
		return counted, slow
	}
	batch := func(round int, every int64) arrow.RecordBatch {
		rs := make([]kv, rows/10)
		for i := range rs {
			rs[i] = kv{int64(i) * every, "run", float64(round)}
		}
		return kvBatch(rs...)
	}
	requests := func(c *blob.Counted) int64 {
		st := c.Stats()
		return st.Gets + st.RangeGets + st.Puts + st.CondPutsWon + st.CondPutsLost + st.CondPutsErr + st.Lists + st.Deletes + st.Heads
	}
	for _, indexed := range []bool{false, true} {
		b.Run(fmt.Sprintf("upsert/index=%v", indexed), func(b *testing.B) {
			c, tb := setup(b, indexed)
			before := requests(c)
			b.ResetTimer()
			for i := range b.N {
				rec := batch(i, 10)
				if _, err := tb.Upsert(ctx, []string{"id"}, rec); err != nil {
					b.Fatal(err)
				}
				rec.Release()
			}
			b.StopTimer()
			b.ReportMetric(float64(requests(c)-before)/float64(b.N), "requests/op")
		})
	}
	b.Run("append", func(b *testing.B) {
		c, tb := setup(b, false)
		before := requests(c)
		b.ResetTimer()
		for i := range b.N {
			rec := batch(i, 1)
			if _, err := tb.Append(ctx, rec); err != nil {
				b.Fatal(err)
			}
			rec.Release()
		}
		b.StopTimer()
		b.ReportMetric(float64(requests(c)-before)/float64(b.N), "requests/op")
	})
}

// BenchmarkUpsertByUUID: a table of 1,000,000 rows keyed by a UUID string
// in 1,000 fragments; each op upserts 10,000 of them (random keys it
// holds, a new reward), through a store whose every request takes 20-30
// ms, with and without a key index on id (paged by hash). It reports
// requests per op.
func BenchmarkUpsertByUUID(b *testing.B) {
	const rows, frags, upserted = 1_000_000, 1_000, 10_000
	schema := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.BinaryTypes.String}, {Name: "reward", Type: arrow.PrimitiveTypes.Float64}}, nil)
	uuid := func(i int) string {
		r := rand.New(rand.NewPCG(7, uint64(i)))
		return fmt.Sprintf("%016x-%016x", r.Uint64(), r.Uint64())
	}
	batch := func(ids []int, reward float64) arrow.RecordBatch {
		bld := array.NewRecordBuilder(memory.DefaultAllocator, schema)
		defer bld.Release()
		for _, i := range ids {
			bld.Field(0).(*array.StringBuilder).Append(uuid(i))
			bld.Field(1).(*array.Float64Builder).Append(reward)
		}
		return bld.NewRecordBatch()
	}
	for _, indexed := range []bool{false, true} {
		b.Run(fmt.Sprintf("index=%v", indexed), func(b *testing.B) {
			under := open(b, "mem://")
			if _, err := commit.Create(ctx, under, schema, nil, nil); err != nil {
				b.Fatal(err)
			}
			tb, err := commit.OpenTable(ctx, under, nil)
			if err != nil {
				b.Fatal(err)
			}
			for f := range frags {
				ids := make([]int, rows/frags)
				for i := range ids {
					ids[i] = f*rows/frags + i
				}
				rec := batch(ids, 0)
				if _, err := tb.Append(ctx, rec); err != nil {
					b.Fatal(err)
				}
				rec.Release()
			}
			if indexed {
				if _, err := tb.CreateIndex(ctx, "id"); err != nil {
					b.Fatal(err)
				}
			}
			c := blob.NewCounted(fault.Wrap(under, fault.Latency(1, 20*time.Millisecond, 30*time.Millisecond)))
			slow, err := commit.OpenTable(ctx, c, nil)
			if err != nil {
				b.Fatal(err)
			}
			r := rand.New(rand.NewPCG(1, 2))
			st := c.Stats()
			before := st.Gets + st.RangeGets + st.Puts + st.CondPutsWon + st.CondPutsLost + st.Lists + st.Deletes + st.Heads
			b.ResetTimer()
			for i := range b.N {
				rec := batch(r.Perm(rows)[:upserted], float64(i+1))
				res, err := slow.Upsert(ctx, []string{"id"}, rec)
				rec.Release()
				if err != nil || res.Replaced != upserted {
					b.Fatalf("upsert: %+v, %v; want %d rows replaced", res, err, upserted)
				}
			}
			b.StopTimer()
			st = c.Stats()
			b.ReportMetric(float64(st.Gets+st.RangeGets+st.Puts+st.CondPutsWon+st.CondPutsLost+st.Lists+st.Deletes+st.Heads-before)/float64(b.N), "requests/op")
		})
	}
}
