package sim

import (
	"errors"
	"fmt"
	"iter"
	"maps"
	"slices"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/stratadb/strata/table"
	"github.com/stratadb/strata/table/changes"
	"github.com/stratadb/strata/table/format"
)

// Followers.
//
// A follower keeps a replica of the table from its changes: a count per
// row id, and the version it has read through. Both are its durable state
// (a trainer's checkpoint): a crash loses only what the operation in
// progress read. It records its position as a named consumer after each
// checkpoint, so that garbage collection keeps what it has not read, and
// follows in turn with changes.Changes from its checkpoint and with
// changes.Follow under its consumer name (which starts from the recorded
// position: a sink keyed by version takes again what it already has).

// consumerRetention is the simulation's GCPolicy.ConsumerRetention: short
// enough that stalls, which move the clock on by hours, outrun it.
const consumerRetention = 3 * time.Hour

type follower struct {
	pos  uint64
	rows map[int64]int
	// recorded: the consumer's position in the store is pos, confirmed
	// by SetConsumer, and it had a position before: garbage collection
	// holds what it has not read. (A consumer's first position may race
	// a collection that read the consumers before it: docs/format.md,
	// "Named consumers".)
	recorded bool
	created  bool // the consumer has recorded a position
	resyncs  int
}

// followOp reads the changes after the follower's checkpoint through the
// latest version, checks them and, when the replica they make equals a
// fresh read of that version, makes them its checkpoint.
func (w *world) followOp(a *actor) (string, string) {
	f := a.follow
	latest, err := table.LatestVersion(w.ctx, a.bucket)
	if err != nil {
		return "follow", short(err)
	}
	if latest <= f.pos {
		return "follow", fmt.Sprintf("at v%d: nothing new", f.pos)
	}
	byConsumer := w.chance(0.5)
	var feed iter.Seq2[changes.Change, error]
	opts := changes.ChangesOptions{Parallelism: 1}
	if byConsumer {
		feed = changes.Follow(w.ctx, a.bucket, f.pos, changes.FollowOptions{ChangesOptions: opts, Consumer: a.name, Until: latest, Poll: time.Millisecond})
	} else {
		feed = changes.Changes(w.ctx, a.bucket, f.pos, latest, opts)
	}
	rows := maps.Clone(f.rows)
	last, n, again, committed := f.pos, 0, 0, false
	for c, err := range feed {
		if err != nil {
			if committed {
				// The checkpoint is made; recording the consumer failed.
				return "follow", fmt.Sprintf("through v%d, %d changes; recording the consumer: %s", f.pos, n, short(err))
			}
			return "follow", w.followError(a, err)
		}
		if c.Version <= f.pos {
			if !byConsumer {
				return "follow", w.fail("changes once", "changes after v%d yield v%d", f.pos, c.Version).Error()
			}
			again++ // the recorded position is behind the checkpoint
			continue
		}
		if c.Version < last {
			return "follow", w.fail("changes in version order", "v%d after v%d", c.Version, last).Error()
		}
		last = c.Version
		if c.Kind == changes.ChangeThrough {
			if msg := w.checkpoint(a, rows, c.Version); msg != "" {
				return "follow", msg
			}
			committed = true
			continue
		}
		if w.movesRows(c.Version) {
			return "follow", w.fail("no moved row is delivered", "v%d (%s) yields a %s of %d rows", c.Version, w.versionEvent(c.Version).kind, c.Kind, c.Rows.NumRows()).Error()
		}
		ids := c.Rows.Column(0).(*array.Int64).Int64Values()
		w.logf("%s reads v%d: %s of %d rows from %d", a.name, c.Version, c.Kind, len(ids), ids[0])
		for _, id := range ids {
			n++
			switch c.Kind {
			case changes.ChangeInsert:
				rows[id]++
			case changes.ChangeDelete:
				if rows[id]--; rows[id] < 0 {
					return "follow", w.fail("changes once", "v%d deletes row %d, which the changes before it never inserted (or deleted already)", c.Version, id).Error()
				}
			default:
				return "follow", w.fail("changes", "v%d yields a change of kind %q", c.Version, c.Kind).Error()
			}
		}
	}
	if byConsumer {
		if committed {
			f.recorded, f.created = f.created, true
		}
		return "follow", fmt.Sprintf("as consumer to v%d: %d rows changed, %d versions' changes taken again", f.pos, n, again)
	}
	if msg := w.checkpoint(a, rows, latest); msg != "" {
		return "follow", msg
	}
	err = table.SetConsumer(w.ctx, a.bucket, a.name, f.pos)
	if err == nil {
		f.recorded, f.created = f.created, true
	}
	return "follow", fmt.Sprintf("to v%d: %d rows changed; consumer recorded: %s", f.pos, n, short(err))
}

// checkpoint checks the replica rows, read through version v, against a
// fresh read of v (when v is still there) and makes it the follower's.
func (w *world) checkpoint(a *actor, rows map[int64]int, v uint64) string {
	maps.DeleteFunc(rows, func(_ int64, n int) bool { return n == 0 })
	if msg := w.compareReplica(a, rows, v); msg != "" {
		return msg
	}
	f := a.follow
	f.pos, f.rows, f.recorded = v, rows, false
	return ""
}

// compareReplica compares rows with a read of version v that no fault
// touches; a version or object collected since cannot be read, and the
// next checkpoint checks what this one could not.
func (w *world) compareReplica(a *actor, rows map[int64]int, v uint64) string {
	s, err := table.Open(w.ctx, w.store, &table.OpenOptions{Version: v})
	if err != nil {
		return ""
	}
	seen, _, err := w.scanSnapshot(s)
	if err != nil {
		return ""
	}
	for _, id := range slices.Sorted(maps.Keys(seen)) {
		if rows[id] != seen[id] {
			return w.fail("changes replay the table", "%s's replica through v%d holds row %d %d times; v%d holds it %d times", a.name, v, id, rows[id], v, seen[id]).Error()
		}
	}
	for _, id := range slices.Sorted(maps.Keys(rows)) {
		if seen[id] == 0 {
			return w.fail("changes replay the table", "%s's replica through v%d holds row %d %d times; v%d does not hold it", a.name, v, id, rows[id], v).Error()
		}
	}
	return ""
}

// followError handles a follow that failed. Garbage collection may take
// what the follower has not read only when its position was not recorded
// or is older than the consumers' retention; the follower then starts
// again from a full read of the latest version, as a consumer told so
// must. Any other error is left for the next turn.
func (w *world) followError(a *actor, err error) string {
	var ce *format.ChangesCollectedError
	if !errors.As(err, &ce) {
		return short(err)
	}
	f := a.follow
	w.emu.Lock()
	landed, known := w.landed[max(f.pos, 1)]
	w.emu.Unlock()
	expired := !known || w.clock.Now().Sub(landed) >= consumerRetention
	if f.recorded && !expired {
		return w.fail("consumers hold what they have not read", "%s recorded at v%d (written %v ago): %v", a.name, f.pos, w.clock.Now().Sub(landed), err).Error()
	}
	s, oerr := table.Open(w.ctx, w.store, nil)
	if oerr != nil {
		return fmt.Sprintf("%s; starting again: %s", short(err), short(oerr))
	}
	seen, _, serr := w.scanSnapshot(s)
	if serr != nil {
		return fmt.Sprintf("%s; starting again from v%d: %s", short(err), s.Version(), short(serr))
	}
	f.pos, f.rows, f.recorded = s.Version(), seen, false
	f.resyncs++
	return fmt.Sprintf("%s (recorded %v, expired %v): starting again from a read of v%d", short(err), f.recorded, expired, f.pos)
}

// versionEvent is the landing of version v (not a ghost of it).
func (w *world) versionEvent(v uint64) manifestEvent {
	w.emu.Lock()
	defer w.emu.Unlock()
	for i := len(w.events) - 1; i >= 0; i-- {
		if e := w.events[i]; e.version == v && !e.again {
			return e
		}
	}
	return manifestEvent{}
}

// movesRows tells whether version v only moved rows: a compaction, an
// index, or the taking back of one of them.
func (w *world) movesRows(v uint64) bool {
	e := w.versionEvent(v)
	if e.kind != format.KindRewrite && e.kind != format.KindCreateIndex {
		return false
	}
	return e.undoes == 0 || w.movesRows(e.undoes)
}

// finishFollowers has every follower read through the latest version with
// no faults: it must get there (a version whose changes never become
// readable is a follower stuck for good) and its replica must equal the
// table.
func (w *world) finishFollowers() error {
	for _, a := range w.actors {
		if a.kind != kFollower {
			continue
		}
		latest, err := table.LatestVersion(w.ctx, w.store)
		if err != nil {
			return w.fail("recovery", "latest version: %v", err)
		}
		a.inc++
		w.newBucket(a)
		for range 3 {
			if a.follow.pos >= latest {
				break
			}
			_, detail := w.followOp(a)
			w.logf("final: %s follow: %s", a.name, detail)
			if w.violation != nil {
				return w.violation
			}
		}
		if a.follow.pos < latest {
			return w.fail("followers keep up", "%s stays at v%d of v%d with no faults", a.name, a.follow.pos, latest)
		}
		w.logf("final: %s read through v%d (%d rows; started again %d times)", a.name, a.follow.pos, len(a.follow.rows), a.follow.resyncs)
	}
	return nil
}
