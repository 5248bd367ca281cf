package commit

import (
	"context"
	"errors"
	"fmt"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/table"
)

// What checkDuplicate finds of a recorded append.
const (
	duplicateStands = iota // the append is stored, at the recorded version
	duplicateNewer         // a version after the state exists: catch up, look again
	duplicateUndone        // its data is lost: it was taken back (undone) just now
)

// checkDuplicate checks a state's record that an append was stored at
// version at, before a caller is told so: a state read through a lagging
// listing may be older than the version that took the append back (a
// commit that stalled past garbage collection is undone, and its name
// forgotten), and a commit whose writer died before undoing it still
// records its name while its data is gone. So: a version after cur, read
// by name, or cur itself collected (a handle that saw nothing for long),
// means catching up first; then the recorded version's fragments
// must be there — if they are lost, the commit is undone here, as its
// writer would have, and the append is to be made anew.
func checkDuplicate(ctx context.Context, b blob.Bucket, cur *table.Manifest, at uint64, o Options) (int, error) {
	var newer bool
	err := retryTransient(ctx, o, func() error {
		_, err := b.Attributes(ctx, table.ManifestKey(cur.Version+1))
		newer = err == nil
		if !errors.Is(err, blob.ErrNotFound) {
			return err
		}
		// No version after cur — or cur is so old that garbage collection
		// took the one after it, and cur with it (a collection takes the
		// oldest first, and never the newest): cur must still be there to
		// be the latest.
		_, err = b.Attributes(ctx, table.ManifestKey(cur.Version))
		newer = errors.Is(err, blob.ErrNotFound)
		if newer {
			return nil
		}
		return err
	})
	if err != nil || newer {
		return duplicateNewer, err
	}
	var m *table.Manifest
	if err := retryTransient(ctx, o, func() (err error) { m, err = table.ReadManifest(ctx, b, at); return err }); err != nil {
		if errors.Is(err, table.ErrVersionNotFound) {
			return duplicateStands, nil // collected: long since stored and kept
		}
		return 0, err
	}
	var lost []uint64
	var undone uint64
	if err := retryTransient(ctx, o, func() (err error) { lost, undone, err = lostFragments(ctx, b, m, o); return err }); err != nil {
		return 0, err
	}
	if len(lost) == 0 && undone == 0 {
		return duplicateStands, nil
	}
	if undone == 0 {
		if err := Undo(ctx, b, m, &o); err != nil && !IsRetryableConflict(err) {
			return 0, fmt.Errorf("v%d, which records an append sent again, lost its data; undoing it failed: %w", at, err)
		}
	}
	return duplicateUndone, nil
}
