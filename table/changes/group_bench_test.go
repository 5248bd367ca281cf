package changes_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/blob/fault"
	"github.com/stratadb/strata/table/changes"
)

// BenchmarkGroupDelivery measures a consumer group of three members
// (each through its own process's view of a store answering every
// request after 20 ms) following a table that gains a version every
// 300 ms: the time from an append's commit to the member that owns it
// holding its rows (p50_ms, p99_ms), with the members' default poll of
// 1s and a poll of 100ms. go test -run '^$' -bench GroupDelivery
// -benchtime 1x ./table/changes
func BenchmarkGroupDelivery(b *testing.B) {
	for _, poll := range []time.Duration{time.Second, 100 * time.Millisecond} {
		b.Run("poll="+poll.String(), func(b *testing.B) {
			for range b.N {
				p50, p99 := groupLatency(b, poll, 40)
				b.ReportMetric(p50, "p50_ms")
				b.ReportMetric(p99, "p99_ms")
			}
		})
	}
}

func groupLatency(b *testing.B, poll time.Duration, versions int) (p50, p99 float64) {
	t := b
	under, tb := openRolloutsTable(t, nil)
	slow := func() blob.Bucket {
		return fault.Wrap(under, fault.Always(fault.Fault{Delay: 20 * time.Millisecond}))
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var mu sync.Mutex
	got := map[uint64]time.Time{}
	var wg sync.WaitGroup
	for _, name := range []string{"m0", "m1", "m2"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for c, err := range changes.FollowGroup(ctx, slow(), "bench", name, changes.GroupOptions{Poll: poll, From: 1}) {
				if err != nil {
					return
				}
				mu.Lock()
				if _, ok := got[c.Version]; !ok && c.Kind == changes.ChangeInsert {
					got[c.Version] = time.Now()
				}
				mu.Unlock()
			}
		}()
	}
	time.Sleep(time.Second) // the members join
	committed := map[uint64]time.Time{}
	for i := range versions {
		res := appendRollouts(t, tb, 0, int64(i*10), 10)
		committed[res.Version] = time.Now()
		time.Sleep(300 * time.Millisecond)
	}
	time.Sleep(2 * poll)
	cancel()
	wg.Wait()
	var lat []float64
	for v, at := range committed {
		if h, ok := got[v]; ok {
			lat = append(lat, float64(h.Sub(at).Microseconds())/1000)
		}
	}
	if len(lat) != versions {
		b.Fatalf("%d of %d versions reached a member", len(lat), versions)
	}
	slices.Sort(lat)
	return lat[len(lat)/2], lat[len(lat)*99/100]
}

// BenchmarkGroupIdleRequests counts the requests of an idle member (the
// default poll and lease, a table that gains nothing) and reports them
// per minute (requests_per_min), beside the other two members of its
// group. go test -run '^$' -bench GroupIdleRequests -benchtime 1x
// ./table/changes
func BenchmarkGroupIdleRequests(b *testing.B) {
	for range b.N {
		t := b
		under, tb := openRolloutsTable(t, nil)
		appendRollouts(t, tb, 0, 0, 10)
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		counted := blob.NewCounted(under)
		for i, name := range []string{"m0", "m1", "m2"} {
			bk := blob.Bucket(under)
			if i == 0 {
				bk = counted
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range changes.FollowGroup(ctx, bk, "idle", name, changes.GroupOptions{}) {
				}
			}()
		}
		time.Sleep(5 * time.Second) // joined and caught up
		before := counted.Stats().Requests()
		const d = 60 * time.Second
		time.Sleep(d)
		n := counted.Stats().Requests() - before
		cancel()
		wg.Wait()
		b.ReportMetric(float64(n)/d.Minutes(), "requests_per_min")
	}
}
