package table

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/table/format"
)

// Time travel by timestamp. A version's commit time is its manifest's
// timestamp, which a commit keeps at or after its parent's (so that the
// versions' times never go back, whatever the writers' clocks say); the
// version as of a time is the newest whose commit time is at or before
// it, compared to the millisecond, as an Iceberg snapshot's timestamp-ms
// is, so that an engine's FOR TIMESTAMP AS OF and Strata's agree. Only the
// versions above the garbage collection boundary are searched (a tagged
// version below it is reached by its tag).

// VersionAsOf returns the manifest of the newest version committed at or
// before at: a binary search over the retained versions' manifests (about
// log2 of their number GETs, and one LIST for the latest and one for the
// boundary). A time before the oldest retained version is
// format.ErrVersionNotFound naming that version and its time.
func VersionAsOf(ctx context.Context, b blob.Bucket, at time.Time) (*format.Manifest, error) {
	latest, err := ReadLatest(ctx, b)
	if err != nil {
		return nil, err
	}
	limit := at.UnixMilli()
	if latest.Timestamp.UnixMilli() <= limit {
		return latest, nil
	}
	boundary, err := GCBoundary(ctx, b)
	if err != nil {
		return nil, err
	}
	lo := max(boundary+1, 1)
	first, err := ReadManifest(ctx, b, lo)
	if err != nil {
		return nil, err
	}
	if first.Timestamp.UnixMilli() > limit {
		return nil, fmt.Errorf("table: no version was committed at or before %s: the oldest retained, v%d, was committed at %s: %w",
			at.UTC().Format(time.RFC3339Nano), lo, first.Timestamp.UTC().Format(time.RFC3339Nano), format.ErrVersionNotFound)
	}
	// first is at or before the limit, latest after it.
	hi := latest.Version
	for hi-lo > 1 {
		mid := lo + (hi-lo)/2
		m, err := ReadManifest(ctx, b, mid)
		if err != nil {
			return nil, err
		}
		if m.Timestamp.UnixMilli() <= limit {
			lo, first = mid, m
		} else {
			hi = mid
		}
	}
	return first, nil
}

// FromAsOf is the version a range of changes since at comes after: the
// version as of at, or 0 (the table's creation) when at is before the
// table's first version and garbage collection has removed none. A time
// before the oldest retained version otherwise is VersionAsOf's error.
func FromAsOf(ctx context.Context, b blob.Bucket, at time.Time) (uint64, error) {
	m, err := VersionAsOf(ctx, b, at)
	if err == nil {
		return m.Version, nil
	}
	if errors.Is(err, format.ErrVersionNotFound) {
		if boundary, berr := GCBoundary(ctx, b); berr == nil && boundary == 0 {
			if _, verr := ReadManifest(ctx, b, 1); verr == nil {
				return 0, nil
			}
		}
	}
	return 0, err
}

// ParseAsOf reads a point in time as --as-of and as_of= take it: an RFC
// 3339 time, with or without fractional seconds (2026-12-07T10:00:00Z,
// 2026-12-07T10:00:00.250+01:00), or a duration before now (90s, 15m,
// 2h, 1h30m).
func ParseAsOf(s string, now time.Time) (time.Time, error) {
	s = strings.TrimSpace(s)
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		if t.IsZero() {
			// The zero instant stands for "no time" in OpenOptions: a
			// nanosecond after it is as far before every version.
			t = t.Add(time.Nanosecond)
		}
		return t, nil
	}
	if d, err := time.ParseDuration(s); err == nil && d >= 0 {
		return now.Add(-d), nil
	}
	return time.Time{}, fmt.Errorf("%w: %q is not a time: want an RFC 3339 time (2026-12-07T10:00:00Z, 2026-12-07T10:00:00.250+01:00) or a duration before now (90s, 15m, 2h, 1h30m)", ErrBadAsOf, s)
}

// ErrBadAsOf: a point in time that does not parse.
var ErrBadAsOf = errors.New("table: bad time")
