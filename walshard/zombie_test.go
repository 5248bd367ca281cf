package walshard_test

import (
	"errors"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/commit"
	"github.com/stratadb/strata/table"
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
			if err := os.Chtimes(filepath.Join(dir, filepath.FromSlash(table.WALKey("w1", 3))), then, then); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := newer.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := newer.Merge(ctx); err != nil {
			t.Fatal(err)
		}
		fence, err := b.Attributes(ctx, table.WALKey("w1", 3))
		if pause == 0 && err != nil {
			t.Fatalf("the newer owner's fence, written a moment ago, is gone after its cleanup: %v", err)
		}
		if pause > 0 && !errors.Is(err, blob.ErrNotFound) {
			t.Fatalf("the fence, %v old, is still there (%+v, %v): the case this checks did not arise", pause, fence, err)
		}
		err = appendOnce(old, "w1", 100)
		if !errors.Is(err, walshard.ErrFenced) && !errors.Is(err, walshard.ErrAppendUnknown) {
			t.Fatalf("paused %v: the older owner's append: %v, want ErrFenced or ErrAppendUnknown", pause, err)
		}
		old.Close()
		newer.Close()
		again := open(t, b, "w1", o)
		exactlyOnce(t, countIDs(t, again.ScanFresh(ctx, table.ScanOptions{})), []int64{1, 2, 3})
		again.Close()
	}
}
