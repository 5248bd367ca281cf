package changes_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/blob/fault"
	"github.com/stratadb/strata/commit"
	"github.com/stratadb/strata/harness/rollouts"
	"github.com/stratadb/strata/table"
	"github.com/stratadb/strata/table/changes"
	"github.com/stratadb/strata/table/format"
	"github.com/stratadb/strata/table/fragment"
)

// BenchmarkChangesOfTheLastVersions reads the changes of the last 10
// versions (10 appends of one fragment) of tables of 100 and of 10,000
// fragments, and reports the requests one read makes: they follow the
// changed fragments, not the table.
//
//	go test -run '^$' -bench ChangesOfTheLastVersions -benchtime 5x ./table
func BenchmarkChangesOfTheLastVersions(b *testing.B) {
	for _, fragments := range []int{100, 10_000} {
		b.Run(fmt.Sprint(fragments), func(b *testing.B) {
			ctx := context.Background()
			under, err := blob.Open(ctx, "file://"+b.TempDir())
			if err != nil {
				b.Fatal(err)
			}
			if _, err := commit.Create(ctx, under, rollouts.Schema, nil, nil); err != nil {
				b.Fatal(err)
			}
			tb, err := commit.OpenTable(ctx, under, nil)
			if err != nil {
				b.Fatal(err)
			}
			// One commit of every fragment but the last 10.
			frags := make([]format.Fragment, fragments-10)
			for i := range frags {
				rec := rollouts.Batch(nil, 1, 0, int64(i), 1)
				if frags[i], err = fragment.Write(ctx, under, rollouts.Schema, rec); err != nil {
					b.Fatal(err)
				}
				rec.Release()
			}
			if _, err := tb.Commit(ctx, format.Transaction{Kind: format.KindAppend, CommitID: format.NewID(), Added: frags}); err != nil {
				b.Fatal(err)
			}
			for i := range 10 {
				rec := rollouts.Batch(nil, 1, 1, int64(i), 1)
				if _, err := tb.Append(ctx, rec); err != nil {
					b.Fatal(err)
				}
				rec.Release()
			}
			latest, err := table.LatestVersion(ctx, under)
			if err != nil {
				b.Fatal(err)
			}
			counted := fault.Wrap(under, nil)
			b.ResetTimer()
			for range b.N {
				rows := 0
				for c, err := range changes.Changes(ctx, counted, latest-10, latest, changes.ChangesOptions{}) {
					if err != nil {
						b.Fatal(err)
					}
					rows += int(c.Rows.NumRows())
				}
				if rows != 10 {
					b.Fatalf("%d rows changed, want 10", rows)
				}
			}
			b.ReportMetric(float64(counted.Requests())/float64(b.N), "requests/op")
		})
	}
}

// BenchmarkFollowLatency appends a row every 200 to 400 ms through a
// store that answers each request in 20 to 30 ms, while a follower polls
// every 100 ms, and reports how long after an append returned the follower
// had its row: p50 and p99 over b.N appends.
//
//	go test -run '^$' -bench FollowLatency -benchtime 100x ./table
func BenchmarkFollowLatency(b *testing.B) {
	ctx := context.Background()
	under, err := blob.Open(ctx, "file://"+b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	if _, err := commit.Create(ctx, under, rollouts.Schema, nil, nil); err != nil {
		b.Fatal(err)
	}
	store := fault.Wrap(under, fault.Latency(1, 20*time.Millisecond, 30*time.Millisecond))
	tb, err := commit.OpenTable(ctx, store, nil)
	if err != nil {
		b.Fatal(err)
	}
	var mu sync.Mutex
	landed := map[int64]time.Time{} // id → when its append returned
	seen := map[int64]time.Time{}   // id → when the follower had it
	fctx, stop := context.WithCancel(ctx)
	defer stop()
	done := make(chan struct{})
	go func() {
		defer close(done)
		opts := changes.FollowOptions{Poll: 100 * time.Millisecond}
		opts.Columns = []string{"id"}
		for c, err := range changes.Follow(fctx, store, 1, opts) {
			if err != nil {
				return
			}
			if c.Kind != changes.ChangeInsert {
				continue
			}
			now := time.Now()
			mu.Lock()
			for _, id := range c.Rows.Column(0).(*array.Int64).Int64Values() {
				seen[id] = now
			}
			mu.Unlock()
		}
	}()
	b.ResetTimer()
	for i := range b.N {
		time.Sleep(200*time.Millisecond + time.Duration(i%7)*30*time.Millisecond)
		rec := rollouts.Batch(nil, 1, 0, int64(i), 1)
		id := rec.Column(0).(*array.Int64).Value(0)
		if _, err := tb.Append(ctx, rec); err != nil {
			b.Fatal(err)
		}
		landed[id] = time.Now()
		rec.Release()
	}
	time.Sleep(time.Second)
	stop()
	<-done
	mu.Lock()
	defer mu.Unlock()
	var delays []time.Duration
	for id, at := range landed {
		if _, ok := seen[id]; !ok {
			b.Fatalf("the follower never saw id %d", id)
		}
		// A follower may see a commit before its writer hears back:
		// then it waited for nothing.
		delays = append(delays, max(seen[id].Sub(at), 0))
	}
	slices.Sort(delays)
	b.ReportMetric(float64(delays[len(delays)/2].Milliseconds()), "p50-ms")
	b.ReportMetric(float64(delays[len(delays)*99/100].Milliseconds()), "p99-ms")
}
