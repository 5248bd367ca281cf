package commit_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/blob/fault"
	"github.com/stratadb/strata/commit"
	"github.com/stratadb/strata/table"
	"github.com/stratadb/strata/table/format"
)

// tableWithVersions makes a table of n versions (one-row appends).
func tableWithVersions(tb testing.TB, n int) blob.Bucket {
	b, err := blob.Open(ctx, "mem://")
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := commit.Create(ctx, b, idSchema, nil, nil); err != nil {
		tb.Fatal(err)
	}
	h, err := commit.OpenTable(ctx, b, nil)
	if err != nil {
		tb.Fatal(err)
	}
	for i := 1; i < n; i++ {
		// Empty appends: versions without data, so the manifests stay small.
		if _, err := h.Commit(ctx, format.Transaction{Kind: format.KindAppend}); err != nil {
			tb.Fatal(err)
		}
	}
	return b
}

func openCost(tb testing.TB, b blob.Bucket) blob.Stats {
	before, _ := blob.StatsOf(b)
	if _, err := table.Open(ctx, b, nil); err != nil {
		tb.Fatal(err)
	}
	after, _ := blob.StatsOf(b)
	return after.Sub(before)
}

// Opening the latest version costs the same requests whatever the number
// of versions: one LIST page and one GET.
func TestOpenLatestCostDoesNotGrowWithVersions(t *testing.T) {
	small, large := tableWithVersions(t, 10), tableWithVersions(t, 10_000)
	a, b := openCost(t, small), openCost(t, large)
	if a.Requests() != 2 || a.Lists != 1 || a.Gets != 1 || b.Requests() != a.Requests() || b.Lists != 1 || b.Gets != 1 {
		t.Fatalf("open latest: %+v with 10 versions, %+v with 10,000; want one LIST and one GET each", a, b)
	}
}

func BenchmarkOpenLatest(b *testing.B) {
	for _, n := range []int{10, 10_000} {
		bucket := tableWithVersions(b, n)
		b.Run(fmt.Sprintf("versions=%d", n), func(b *testing.B) {
			var reqs int64
			for b.Loop() {
				reqs += openCost(b, bucket).Requests()
			}
			b.ReportMetric(float64(reqs)/float64(b.N), "requests/op")
		})
	}
}

// A commit that loses a race goes back into it after one round trip: it
// reads the winner's transaction (which it must, to learn its own create's
// outcome), rebases on it, and creates the next version — no LIST, and the
// winner's transaction is not read twice.
func TestALoserRetriesOneRoundTripAfterLosing(t *testing.T) {
	b := tableWithVersions(t, 3)
	base, err := table.ReadLatest(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	// Another writer takes the version this commit will try.
	other, err := commit.OpenTable(ctx, b, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := other.Commit(ctx, format.Transaction{Kind: format.KindAppend}); err != nil {
		t.Fatal(err)
	}
	before, _ := blob.StatsOf(b)
	res, err := commit.Commit(ctx, b, base, format.Transaction{Kind: format.KindAppend}, nil)
	if err != nil {
		t.Fatal(err)
	}
	after, _ := blob.StatsOf(b)
	spent := after.Sub(before)
	if res.Version != base.Version+2 || res.Rebases != 1 {
		t.Fatalf("commit: %+v", res)
	}
	if spent.CondPutsLost != 1 || spent.CondPutsWon != 1 || spent.Gets != 1 || spent.Lists != 0 || spent.Requests() != 3 {
		t.Fatalf("a commit that lost once made %+v; want the lost create, one GET, the won create", spent)
	}
}

// racedBy wraps b so that, before each of the first rounds manifest creates
// made through it, another writer commits k versions: each of those
// creates loses. Its requests go to b directly.
func racedBy(t *testing.T, b blob.Bucket, k, rounds int) blob.Bucket {
	other, err := commit.OpenTable(ctx, b, nil)
	if err != nil {
		t.Fatal(err)
	}
	left := rounds
	return blob.NewCounted(fault.Wrap(b, fault.InjectorFunc(func(op fault.Op, key string) fault.Fault {
		if op == fault.OpPutIfAbsent && strings.HasPrefix(key, format.VersionsDir) && left > 0 {
			left--
			for range k {
				if _, err := other.Commit(ctx, format.Transaction{Kind: format.KindAppend}); err != nil {
					t.Error(err)
				}
			}
		}
		return fault.Fault{}
	})))
}

// A writer that keeps losing to another one does not back off — a pause
// would only put it further behind — and catches up with a LIST every
// fourth loss; in a storm (its catch-up finds stormVersions or more
// versions made after the one it lost) it backs off before every attempt.
// The backoff here is an hour, so a pause shows as the deadline.
func TestALoserBacksOffOnlyInAStorm(t *testing.T) {
	// race commits an append on a table of 3 versions while another writer
	// takes k versions before each of its first rounds creates, within
	// timeout.
	race := func(t *testing.T, k, rounds int, timeout time.Duration) (uint64, commit.Result, blob.Stats, error) {
		b := tableWithVersions(t, 3)
		base, err := table.ReadLatest(ctx, b)
		if err != nil {
			t.Fatal(err)
		}
		w := racedBy(t, b, k, rounds)
		ctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		res, err := commit.Commit(ctx, w, base, format.Transaction{Kind: format.KindAppend},
			&commit.Options{BaseBackoff: time.Hour, MaxBackoff: time.Hour})
		spent, _ := blob.StatsOf(w)
		return base.Version, res, spent, err
	}
	t.Run("one writer ahead", func(t *testing.T) {
		base, res, spent, err := race(t, 1, 20, time.Minute)
		if err != nil {
			t.Fatalf("a loser in a race of two: %v", err)
		}
		if res.Rebases != 20 || res.Version != base+21 || spent.Lists != 5 {
			t.Fatalf("commit %+v after %d listings; want 20 losses, version %d, a listing every fourth loss", res, spent.Lists, base+21)
		}
	})
	t.Run("a storm", func(t *testing.T) {
		if _, _, _, err := race(t, 9, 12, 2*time.Second); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("a loser 9 versions behind at every loss did not back off: %v", err)
		}
	})
}
