package commit_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

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
