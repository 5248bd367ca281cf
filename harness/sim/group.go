package sim

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/stratadb/strata/table"
	"github.com/stratadb/strata/table/changes"
	"github.com/stratadb/strata/table/format"
)

// Consumer group members.
//
// The members of one group read their shares of the changes with
// changes.ReadGroupShare, one read an operation: each read acknowledges
// the one before (its rows are in the group's sink by then), so a member
// that crashes between them loses only its acknowledgement, and the units
// come again to whichever member owns their partitions. A member may
// leave, and may stall past its lease (the clock moves on) before its
// next read. The group's sink keys rows by version and unit, as a
// member's writes would be: a unit delivered again must hold the same
// rows, and, with every member read through the latest version at the
// end, the sink replayed in version order must give the table.

const (
	groupName       = "learners"
	groupLease      = 10 * time.Minute
	groupPartitions = 8
)

type groupUnit struct {
	version, unit uint64
	kind          changes.ChangeKind
}

// groupState is the group's sink and what its members hold.
type groupState struct {
	units    map[groupUnit]map[int64]int
	again    int
	resynced bool // a collection took what the group had not read, past the retention: the sink no longer replays the table
	acks     map[string]*changes.GroupShare
	inc      map[string]int // the incarnation an ack belongs to: a crash loses it
}

func newGroupState() *groupState {
	return &groupState{units: map[groupUnit]map[int64]int{}, acks: map[string]*changes.GroupShare{}, inc: map[string]int{}}
}

func (w *world) groupOptions() changes.GroupOptions {
	return changes.GroupOptions{Lease: groupLease, Partitions: groupPartitions, Now: w.clock.Now}
}

// groupOp is a member's read of its share, or its leaving.
func (w *world) groupOp(a *actor) (string, string) {
	g := w.group
	if g.inc[a.name] != a.inc {
		g.acks[a.name], g.inc[a.name] = nil, a.inc // a new process: the last read was never acknowledged
	}
	if w.chance(0.1) {
		err := changes.LeaveGroup(w.ctx, a.bucket, groupName, a.name, w.clock.Now)
		g.acks[a.name] = nil
		return "group", "leaves: " + short(err)
	}
	gr, err := changes.ReadGroupShare(w.ctx, a.bucket, groupName, a.name, w.groupOptions(), g.acks[a.name], 0)
	if err != nil {
		return "group", w.groupError(a, err)
	}
	g.acks[a.name] = nil // acknowledged
	got, rows, msg := w.readShare(a, gr)
	if msg == "" {
		msg = w.sinkTake(a, got)
	}
	if msg != "" {
		return "group", msg
	}
	if len(gr.Share.Partitions) > 0 {
		g.acks[a.name] = &gr.Share
	}
	detail := fmt.Sprintf("partitions %v through v%d: %d units, %d rows", gr.Share.Partitions, gr.Share.Through, len(got), rows)
	if w.chance(0.1) {
		w.clock.Advance(2 * groupLease) // stalls past its lease before it acknowledges
		detail += "; stalls past its lease"
	}
	return "group", detail
}

// readShare reads the rows of a member's read by unit.
func (w *world) readShare(a *actor, gr *changes.GroupRead) (map[groupUnit]map[int64]int, int, string) {
	got := map[groupUnit]map[int64]int{}
	rows := 0
	for c, err := range gr.Changes(w.ctx, changes.ChangesOptions{Parallelism: 1}) {
		if err != nil {
			return nil, 0, w.groupError(a, err)
		}
		if w.movesRows(c.Version) {
			return nil, 0, w.fail("no moved row is delivered", "v%d (%s) yields a %s of %d rows to %s", c.Version, w.versionEvent(c.Version).kind, c.Kind, c.Rows.NumRows(), a.name).Error()
		}
		k := groupUnit{c.Version, c.Unit, c.Kind}
		if got[k] == nil {
			got[k] = map[int64]int{}
		}
		for _, id := range c.Rows.Column(0).(*array.Int64).Int64Values() {
			got[k][id]++
			rows++
		}
	}
	return got, rows, ""
}

// sinkTake puts a read's units in the group's sink: a unit it has holds
// the same rows.
func (w *world) sinkTake(a *actor, got map[groupUnit]map[int64]int) string {
	g := w.group
	for k, ids := range got {
		if have, ok := g.units[k]; ok {
			g.again++
			if !maps.Equal(have, ids) {
				return w.fail("group units once", "%s reads unit %d of v%d (%s) again with other rows", a.name, k.unit, k.version, k.kind).Error()
			}
			continue
		}
		g.units[k] = ids
	}
	return ""
}

// groupError handles a member's failed read: a collection may take what
// the group has not read only past the consumers' retention (then the
// group starts again from the latest version, and its sink no longer
// replays the table); any other error is left for the next read.
func (w *world) groupError(a *actor, err error) string {
	var ce *format.ChangesCollectedError
	if !errors.As(err, &ce) {
		return short(err)
	}
	w.emu.Lock()
	landed, known := w.landed[max(ce.Version, 1)]
	w.emu.Unlock()
	if known && w.clock.Now().Sub(landed) < consumerRetention {
		return w.fail("consumers hold what they have not read", "%s: the group's v%d (written %v ago) was collected: %v", a.name, ce.Version, w.clock.Now().Sub(landed), err).Error()
	}
	latest, lerr := table.LatestVersion(w.ctx, w.store)
	if lerr != nil {
		return short(err)
	}
	_, uerr := table.UpdateGroup(w.ctx, w.store, groupName, nil, nil, func(g *table.Group) bool {
		for p := range g.Positions {
			g.Positions[p] = max(g.Positions[p], latest)
		}
		return true
	})
	w.group.resynced = true
	return fmt.Sprintf("%s: past the retention; the group starts again at v%d: %s", short(err), latest, short(uerr))
}

// startGroup makes the group's first state, before anything runs, so that
// every collection sees it.
func (w *world) startGroup() error {
	fresh := func() (*table.Group, error) {
		return &table.Group{Partitions: groupPartitions, Members: map[string]time.Time{}, Positions: make([]uint64, groupPartitions)}, nil
	}
	_, err := table.UpdateGroup(w.ctx, w.store, groupName, nil, fresh, func(*table.Group) bool { return true })
	return err
}

// finishGroup has the members read, with no faults, until the group is
// through the latest version, then replays the sink against the table.
func (w *world) finishGroup() error {
	var members []*actor
	for _, a := range w.actors {
		if a.kind == kGroupMember {
			a.inc++
			w.newBucket(a)
			members = append(members, a)
			w.group.acks[a.name] = nil // a new process
		}
	}
	if len(members) == 0 {
		return nil
	}
	latest, err := table.LatestVersion(w.ctx, w.store)
	if err != nil {
		return w.fail("recovery", "latest version: %v", err)
	}
	for range 20 {
		g, err := table.ReadGroup(w.ctx, w.store, groupName)
		if err != nil {
			return w.fail("recovery", "the group: %v", err)
		}
		if g.Slowest() >= latest {
			break
		}
		for _, a := range members {
			w.group.inc[a.name] = a.inc
			gr, err := changes.ReadGroupShare(w.ctx, a.bucket, groupName, a.name, w.groupOptions(), w.group.acks[a.name], 0)
			if err != nil {
				return w.fail("group members keep up", "%s: %v", a.name, err)
			}
			w.group.acks[a.name] = nil
			got, _, msg := w.readShare(a, gr)
			if msg == "" {
				w.sinkTake(a, got)
			}
			if w.violation != nil {
				return w.violation
			}
			if msg != "" { // collected past the retention: the group started again
				w.logf("final: %s: %s", a.name, msg)
				continue
			}
			if len(gr.Share.Partitions) > 0 {
				w.group.acks[a.name] = &gr.Share
			}
		}
	}
	g, err := table.ReadGroup(w.ctx, w.store, groupName)
	if err != nil || g.Slowest() < latest {
		return w.fail("group members keep up", "the group stays at %v of v%d with no faults (%v)", g, latest, err)
	}
	if w.group.resynced {
		w.logf("final: the group read through v%d (started again after a collection past the retention)", latest)
		return nil
	}
	rows := map[int64]int{}
	keys := slices.SortedFunc(maps.Keys(w.group.units), func(x, y groupUnit) int {
		if x.version != y.version {
			return int(x.version) - int(y.version)
		}
		if x.kind != y.kind {
			if x.kind == changes.ChangeDelete {
				return -1
			}
			return 1
		}
		return int(x.unit) - int(y.unit)
	})
	for _, k := range keys {
		if k.version > latest {
			continue
		}
		for id, n := range w.group.units[k] {
			if k.kind == changes.ChangeInsert {
				rows[id] += n
			} else if rows[id] -= n; rows[id] < 0 {
				return w.fail("group units once", "the group's sink deletes row %d at v%d more often than it inserted it", id, k.version)
			}
		}
	}
	maps.DeleteFunc(rows, func(_ int64, n int) bool { return n == 0 })
	if msg := w.compareReplica(&actor{name: "the group's sink"}, rows, latest); msg != "" {
		return w.violation
	}
	w.logf("final: the group read through v%d: %d units, %d delivered again", latest, len(w.group.units), w.group.again)
	return nil
}
