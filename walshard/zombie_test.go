package walshard_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/commit"
	"github.com/stratadb/strata/table"
	"github.com/stratadb/strata/table/format"
	"github.com/stratadb/strata/walshard"
)

// An owner paused while a newer one took over, replayed, flushed, merged
// and cleaned up its WAL must not be acknowledged when it wakes: soon
// after, the newer owner's fence is still there to collide with; later,
// the paused owner reads the epoch claims before it acknowledges.
func TestAPausedOwnerIsNotAcknowledgedAfterTheNewerOneCleanedUp(t *testing.T) {
	for _, pause := range []time.Duration{0, 10 * time.Minute} {
		dir := t.TempDir()
		b := newTable(t, "file://"+dir)
		var offset atomic.Int64 // the clock, moved forward
		o := walshard.Options{Commit: commit.Options{Now: func() time.Time { return time.Now().Add(time.Duration(offset.Load())) }}}
		old := open(t, b, "w1", o)
		appendIDs(t, old, 1, 2) // position 2 (1 is old's fence)
		newer := open(t, b, "w1", o)
		appendIDs(t, newer, 3) // its fence is at 3, where old writes next
		// The pause passes for the owners and for the store: the fence's
		// age is judged by the store's clock (a folder's: file times).
		offset.Add(int64(pause))
		if pause > 0 {
			then := time.Now().Add(-pause)
			if err := os.Chtimes(filepath.Join(dir, filepath.FromSlash(format.WALKey("w1", 3))), then, then); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := newer.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := newer.Merge(ctx); err != nil {
			t.Fatal(err)
		}
		fence, err := b.Attributes(ctx, format.WALKey("w1", 3))
		if pause == 0 && err != nil {
			t.Fatalf("the newer owner's fence, written a moment ago, is gone after its cleanup: %v", err)
		}
		if pause > 0 && !errors.Is(err, blob.ErrNotFound) {
			t.Fatalf("the fence, %v old, is still there (%+v, %v): the case this checks did not arise", pause, fence, err)
		}
		err = appendOnce(old, "w1", 100)
		if !errors.Is(err, walshard.ErrFenced) && !errors.Is(err, walshard.ErrAppendUnknown) {
			t.Fatalf("paused %v: the older owner's append: %v, want walshard.ErrFenced or walshard.ErrAppendUnknown", pause, err)
		}
		old.Close()
		newer.Close()
		again := open(t, b, "w1", o)
		exactlyOnce(t, countIDs(t, again.ScanFresh(ctx, table.ScanOptions{})), []int64{1, 2, 3})
		again.Close()
	}
}

// pauseOnce blocks the first listing of prefix until released.
type pauseOnce struct {
	blob.Bucket
	prefix  string
	reached chan struct{}
	release chan struct{}
	once    atomic.Bool
}

func (p *pauseOnce) ListPage(ctx context.Context, prefix, token string, n int) (blob.Page, error) {
	if prefix == p.prefix && p.once.CompareAndSwap(false, true) {
		close(p.reached)
		<-p.release
	}
	return p.Bucket.ListPage(ctx, prefix, token, n)
}

// An owner that pauses while it opens — its epoch claimed, its WAL not yet
// listed — while an adoption takes the shard over, fences it, and retires
// it, must not acknowledge an append when it wakes: the adopter's fence
// lies below the one the waking owner places, where none of its writes
// meets it, so the owner reads the claims again once its fence is in, and
// its open fails as fenced.
func TestAnOwnerAdoptedWhileItOpenedIsFenced(t *testing.T) {
	under := newTable(t, "file://"+t.TempDir())
	p := &pauseOnce{Bucket: under, prefix: format.WALDir("w1"),
		reached: make(chan struct{}), release: make(chan struct{})}
	opened := make(chan error, 1)
	var old *walshard.Shard
	go func() {
		var err error
		old, err = walshard.Open(ctx, p, &walshard.Options{Shard: "w1"})
		opened <- err
	}()
	<-p.reached
	res, err := walshard.Adopt(ctx, under, "w1", &walshard.Options{})
	if err != nil || res.Epoch != 2 {
		t.Fatalf("adoption while the owner opened: %+v %v", res, err)
	}
	close(p.release)
	err = <-opened
	if err == nil {
		err = appendOnce(old, "w1", 7)
		old.Close()
	}
	if !errors.Is(err, walshard.ErrFenced) {
		t.Fatalf("the owner adopted while it opened: %v, want walshard.ErrFenced (an acknowledged append would be lost)", err)
	}
}
