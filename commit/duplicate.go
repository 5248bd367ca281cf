package commit

import (
	"context"
	"errors"
	"fmt"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/table"
	"github.com/stratadb/strata/table/format"
)

// What checkDuplicate finds of a recorded append.
const (
	duplicateStands = iota // the append is stored, at the recorded version
	duplicateUndone        // it was taken back: by a version since, or (its data lost) just now
)

// checkDuplicate checks a state's record that an append was stored at
// version at, before a caller is told so: a state read through a lagging
// listing may be older than the version that took the append back (a
// commit that stalled past garbage collection is undone, and its name
// forgotten), and a commit whose writer died before undoing it still
// records its name while its data is gone. So the versions after at, up
// to the newest (read by name past cur, or listed when cur itself is
// collected), are looked through for one that takes it back; then the
// recorded version's fragments must be there — if they are lost, the
// commit is undone here, as its writer would have, and the append is to
// be made anew. What newer versions record of the name is not asked: a
// retry that waited longer than the window (format.IdempotencyWindow) finds
// the name gone from them, forgotten by age and not by a take-back, and
// its rows stored.
func checkDuplicate(ctx context.Context, b blob.Bucket, cur *format.Manifest, k format.AppendKey, at uint64, o Options) (int, error) {
	var latest uint64
	err := retryTransient(ctx, o, func() error {
		_, err := b.Attributes(ctx, format.ManifestKey(cur.Version))
		if errors.Is(err, blob.ErrNotFound) {
			// Collected (a collection takes the oldest first, and never
			// the newest): the versions after it are listed.
			latest, err = table.LatestVersion(ctx, b)
			return err
		}
		if err != nil {
			return err
		}
		latest, err = table.NewestFrom(ctx, b, cur.Version)
		return err
	})
	if err != nil {
		return 0, err
	}
	u, err := undoneBetween(ctx, b, at, latest, o)
	if err != nil {
		return 0, err
	}
	if u != 0 {
		return duplicateUndone, nil
	}
	var m *format.Manifest
	if err := retryTransient(ctx, o, func() (err error) { m, err = table.ReadManifest(ctx, b, at); return err }); err != nil {
		if errors.Is(err, format.ErrVersionNotFound) {
			return recordedStill(ctx, b, cur, latest, k, at, o)
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

// recordedStill decides an append recorded at a version since collected,
// by what the newest version records: long since stored and kept when it
// records the name still; taken back by a version collected with it when
// it does not, and to be made anew. (A retry that found its name at a
// version it then waited for past both the window and the retention of
// versions cannot tell a name forgotten by age from one taken back, and
// is made anew: that wait is beyond the window the names promise.)
func recordedStill(ctx context.Context, b blob.Bucket, cur *format.Manifest, latest uint64, k format.AppendKey, at uint64, o Options) (int, error) {
	m := cur
	if latest != cur.Version {
		if err := retryTransient(ctx, o, func() (err error) { m, err = table.ReadManifest(ctx, b, latest); return err }); err != nil {
			return 0, err
		}
	}
	if got, found, err := m.Producers.Lookup(k); err == nil && found && got.At == at {
		return duplicateStands, nil
	}
	return duplicateUndone, nil
}
