package walshard_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/table"
	"github.com/stratadb/strata/walshard"
)

// lagging hides from listings the keys under a prefix created after it was
// made, as a store whose listings lag behind its writes does for a moment;
// reads by name see them.
type lagging struct {
	blob.Bucket
	prefix string
	known  map[string]bool
}

func newLagging(t *testing.T, b blob.Bucket, prefix string) *lagging {
	l := &lagging{Bucket: b, prefix: prefix, known: map[string]bool{}}
	for o, err := range blob.List(ctx, b, prefix, 0) {
		if err != nil {
			t.Fatal(err)
		}
		l.known[o.Key] = true
	}
	return l
}

func (l *lagging) ListPage(ctx context.Context, prefix, token string, n int) (blob.Page, error) {
	page, err := l.Bucket.ListPage(ctx, prefix, token, n)
	var kept []blob.ObjectInfo
	for _, o := range page.Objects {
		if !strings.HasPrefix(o.Key, l.prefix) || l.known[o.Key] {
			kept = append(kept, o)
		}
	}
	page.Objects = kept
	return page, err
}

// A new owner whose listing of the WAL misses the entries written a
// moment ago still replays them: it reads positions by name.
func TestReplayDoesNotTrustALaggingListing(t *testing.T) {
	b := newTable(t, "mem://")
	s := open(t, b, "w1", walshard.Options{})
	appendIDs(t, s, seq(0, 5)...)
	lag := newLagging(t, b, "_shards/w1/wal/")
	appendIDs(t, s, seq(5, 5)...) // entries the lagging listing will not show
	s.Close()
	s2 := open(t, lag, "w1", walshard.Options{})
	defer s2.Close()
	exactlyOnce(t, countIDs(t, s2.ScanFresh(ctx, table.ScanOptions{})), seq(0, 10))
}
