package changes

import (
	"context"
	"errors"
	"iter"
	"time"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/table"
	"github.com/stratadb/strata/table/format"
)

// listEvery: one look for a new version in this many is a listing.
const listEvery = 10

// ChangeThrough is the kind of the marker Follow yields once every change
// through its Version was yielded (its Rows are nil): the position to
// store, so that following again from it delivers every change once.
const ChangeThrough ChangeKind = "through"

// FollowOptions shape Follow.
type FollowOptions struct {
	ChangesOptions
	// Poll is the time between looks for a new version when there is
	// none (default 1s); each look is one request: a GET of the next
	// version's manifest, and one look in ten a LIST.
	Poll time.Duration
	// Consumer, when set, names the follower: it starts after the
	// consumer's recorded position (the from argument is used only when
	// the consumer has none yet) and records its position (SetConsumer)
	// after each through marker, once the loop body has returned from it
	// (a body that stops at a marker is done with its version). Garbage
	// collection keeps what a named consumer has not read
	// (compactor.GCPolicy.ConsumerRetention).
	Consumer string
	// Until, when set, ends the follow (with no error) once it has read
	// through this version, or at once when it starts there or after.
	Until uint64
}

// Follow yields the changes after version from as versions land, in
// version order, and waits for the next version when there is none: it
// ends only when ctx does (yielding ctx's error) or on the first error.
// After the changes of each run of versions it yields a ChangeThrough
// marker naming the newest version read; a version with no change
// (a compaction) is covered by the next marker.
//
// Delivery is once per position: a follower that stores the marker's
// version with what it did with the changes (or records it as a named
// consumer) and follows again from it sees every change once. A process
// that dies after acting on a version's changes and before its position
// is stored sees that version again; a sink keyed by _version takes it
// once.
func Follow(ctx context.Context, b blob.Bucket, from uint64, opts FollowOptions) iter.Seq2[Change, error] {
	if opts.Poll <= 0 {
		opts.Poll = time.Second
	}
	return func(yield func(Change, error) bool) {
		if opts.Consumer != "" {
			c, err := table.ReadConsumer(ctx, b, opts.Consumer)
			switch {
			case err == nil:
				from = c.Version
			case !errors.Is(err, format.ErrNotFound):
				yield(Change{}, err)
				return
			}
		}
		// prev is the version read through, read once there is a newer
		// one (an idle follow makes nothing but its looks); before
		// version 1, the empty table.
		prev, read := &changeState{m: &format.Manifest{Version: from}}, from == 0
		for looks := 0; ; looks++ {
			if opts.Until != 0 && prev.m.Version >= opts.Until {
				return
			}
			// A look for a new version: the next one by name (one GET,
			// which no lagging listing delays, and its manifest is then
			// in hand), or, at the start and every listEvery looks, a
			// listing, which also finds a next version garbage
			// collection took (then the changes say so).
			began := time.Now()
			latest, next, err := prev.m.Version, (*format.Manifest)(nil), error(nil)
			if looks%listEvery != 0 {
				if next, err = table.ReadManifest(ctx, b, latest+1); err == nil {
					latest = next.Version
				} else if errors.Is(err, format.ErrVersionNotFound) {
					err = nil
				}
			} else {
				latest, err = table.LatestVersion(ctx, b)
			}
			if err != nil {
				yield(Change{}, err)
				return
			}
			if latest > prev.m.Version {
				if !read {
					if prev.m, err = readForChanges(ctx, b, from); err != nil {
						yield(Change{}, err)
						return
					}
					read = true
				}
				if prev = followTo(ctx, b, prev, latest, opts, yield, next); prev == nil {
					return
				}
				looks = 0 // the next look is by name
				continue
			}
			select {
			case <-ctx.Done():
				yield(Change{}, ctx.Err())
				return
			case <-time.After(opts.Poll - time.Since(began)): // looks Poll apart
			}
		}
	}
}

// followTo yields the changes after prev through to and the marker, then
// records the consumer's position; it returns to's manifest, nil when the
// follow ends. It keeps the manifest it read last, so that the next run
// reads only the new versions'.
func followTo(ctx context.Context, b blob.Bucket, prev *changeState, to uint64, opts FollowOptions, yield func(Change, error) bool, have *format.Manifest) *changeState {
	cur := changesAfter(ctx, b, prev, to, opts.ChangesOptions, yield, have)
	if cur == nil {
		return nil
	}
	more := yield(Change{Version: to, Kind: ChangeThrough}, nil)
	if opts.Consumer != "" {
		// The body has returned from the marker: whether or not it asks
		// for more, it is done with every change through to.
		if err := table.SetConsumer(ctx, b, opts.Consumer, to); err != nil {
			if more {
				yield(Change{}, err)
			}
			return nil
		}
	}
	if !more {
		return nil
	}
	return cur
}
