package changes

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"maps"
	"slices"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/internal/plant"
	"github.com/stratadb/strata/table"
	"github.com/stratadb/strata/table/evolve"
	"github.com/stratadb/strata/table/format"
)

// GroupOptions shape FollowGroup.
type GroupOptions struct {
	ChangesOptions
	// Poll is the time between looks for a new version when there is
	// none (default 1s): a LIST each, and one look in five a GET of the
	// group's next state (another member's join or leave).
	Poll time.Duration
	// Lease is how long a member's claim lasts (default 30s): it renews
	// it every half of it, and a member that has not renewed it for
	// that long (killed, partitioned, stopped) loses its partitions to
	// the others at their next renewal.
	Lease time.Duration
	// Partitions is how many partitions the units are hashed into, for a
	// group that has no state yet (default table.DefaultGroupPartitions);
	// a group keeps the number it was made with.
	Partitions int
	// From is where a group with no state yet starts: every change after
	// it goes to the group's members (refused when past the latest
	// version or collected: table.CheckGroupStart). A group that exists
	// goes on from its positions.
	From uint64
	// Until, when set, ends the follow (with no error) once the member's
	// partitions are read through this version, or at once when it owns
	// none.
	Until uint64
	// Now is the clock the claims are made and judged by (default
	// time.Now).
	Now func() time.Time
}

func (m *groupMember) now() time.Time {
	if m.opts.Now != nil {
		return m.opts.Now()
	}
	return time.Now()
}

// FollowGroup follows the table as member of consumer group group: the
// units of change of each new version — each fragment it adds, with its
// rows, and its deletes (with the rows a restore brings back) as one more
// unit, which is the unit of its lowest added fragment when it adds any,
// so that an upsert's deletes go with its first inserts — are hashed into
// the group's partitions (table.GroupPartition), and the partitions are
// given to the live members, moving few as members come and go
// (table.Group.Rebalance): each unit goes to one member. It yields, as Follow does, the changes of its units version by
// version (Change.Unit names each one's unit), then a ChangeThrough
// marker, after which, once the loop body returns, it records its
// partitions' positions in the group's next state.
//
// The group's state lives in the bucket (table.UpdateGroup: numbered
// states, each created once); there is no coordinator. A member renews
// its claim every Lease/2; one whose claim lapsed loses its partitions to
// the others, and one that stops (the loop body stops, ctx ends) gives
// them back at once. A member joining or leaving moves partitions; the
// others see it within five looks.
//
// Delivery is once per position, as Follow's: a unit the member acted on
// and had not recorded when it died is delivered again, to whichever
// member owns its partition then, and a member stalled past its lease may
// still hand out the units it was reading; a sink keyed by the version
// and the unit takes each once. No unit is skipped: a partition's
// position only ever moves to what a member delivered (see table.Group).
// Garbage collection keeps what the group's slowest partition has not
// read, as a named consumer's.
func FollowGroup(ctx context.Context, b blob.Bucket, group, member string, opts GroupOptions) iter.Seq2[Change, error] {
	if opts.Poll <= 0 {
		opts.Poll = time.Second
	}
	if opts.Lease <= 0 {
		opts.Lease = 30 * time.Second
	}
	if opts.Partitions <= 0 {
		opts.Partitions = table.DefaultGroupPartitions
	}
	return func(yield func(Change, error) bool) {
		if err := table.CheckMemberName(member); err != nil {
			yield(Change{}, err)
			return
		}
		m := &groupMember{b: b, group: group, name: member, opts: opts}
		if err := m.claim(ctx, nil); err != nil {
			yield(Change{}, err)
			return
		}
		defer m.leave(ctx)
		for looks := 1; ; looks++ {
			began := time.Now()
			// A claim due (a busy member, or one stopped for a while)
			// is renewed before a run: the run then reads the group as
			// it is now, not as it was before the stop.
			if m.now().Sub(m.renewed) >= opts.Lease/2 {
				if err := m.claim(ctx, nil); err != nil {
					yield(Change{}, err)
					return
				}
			}
			pos, from := m.positions()
			if opts.Until != 0 && from >= opts.Until {
				return // read through Until, or owns nothing
			}
			latest, err := table.LatestVersion(ctx, b)
			if err != nil {
				yield(Change{}, err)
				return
			}
			to := latest
			if opts.Until != 0 {
				to = min(to, opts.Until)
			}
			if len(pos) > 0 && to > from {
				more, err := m.deliver(ctx, to, pos, yield)
				if err != nil {
					if more {
						yield(Change{}, err)
					}
					return
				}
				if !more {
					return
				}
				looks = 0
				continue
			}
			select {
			case <-ctx.Done():
				yield(Change{}, ctx.Err())
				return
			case <-time.After(opts.Poll - time.Since(began)):
			}
			if looks%5 == 0 && m.now().Sub(m.renewed) < opts.Lease/2 {
				var newer *table.Group
				if newer, err = table.NewerGroupState(ctx, b, m.g); newer != nil {
					m.g = newer
				}
			}
			if err != nil {
				yield(Change{}, err)
				return
			}
		}
	}
}

// groupMember is a member's view of its group.
type groupMember struct {
	b       blob.Bucket
	group   string
	name    string
	opts    GroupOptions
	g       *table.Group // the newest state it knows
	renewed time.Time
}

// positions is the member's partitions in the state it knows, each with
// its position, and the lowest of them (the largest uint64 when it owns
// none).
func (m *groupMember) positions() (map[int]uint64, uint64) {
	owned := m.g.Owned(m.name, m.now())
	pos := make(map[int]uint64, len(owned))
	from := uint64(1<<64 - 1)
	for _, p := range owned {
		pos[p] = m.g.Positions[p]
		from = min(from, pos[p])
	}
	return pos, from
}

// deliver yields the changes of the units of versions from+1 through to
// in the partitions of pos that are after each one's position, and the
// marker; then it records the positions. more is false when the loop
// body stopped; err, a failure (not yet yielded).
func (m *groupMember) deliver(ctx context.Context, to uint64, pos map[int]uint64, yield func(Change, error) bool) (more bool, err error) {
	for c, err := range shareChanges(ctx, m.b, m.group, m.g.Partitions, pos, to, m.opts.ChangesOptions) {
		if err != nil {
			return true, err
		}
		if !yield(c, nil) {
			return false, nil
		}
	}
	more = yield(Change{Version: to, Kind: ChangeThrough}, nil)
	// The body returned from the marker: every unit of these partitions
	// through to was delivered, from positions the group held.
	err = m.claim(ctx, func(g *table.Group) { record(g, slices.Collect(maps.Keys(pos)), to) })
	return more, err
}

// shareChanges yields the changes of the units of the partitions of pos,
// each after its position, through to. A member whose view of the group
// is behind (a listing that lagged, a state kept while others wrote) may
// ask from a version garbage collection took once the group had read
// past it: it then takes the group's newest positions of its partitions,
// which only ever name what was delivered, and goes on from them; only a
// version the group itself has yet to read is an error.
func shareChanges(ctx context.Context, b blob.Bucket, group string, n int, pos map[int]uint64, to uint64, co ChangesOptions) iter.Seq2[Change, error] {
	return func(yield func(Change, error) bool) {
		co.owns = func(v, u uint64) bool {
			at, ok := pos[table.GroupPartition(v, u, n)]
			return ok && v > at
		}
		for attempt := 0; ; attempt++ {
			from := to
			for _, at := range pos {
				from = min(from, at)
			}
			if from >= to {
				return
			}
			var collected *format.ChangesCollectedError
			yielded := false
			for c, err := range Changes(ctx, b, from, to, co) {
				if err != nil && !yielded && attempt == 0 && errors.As(err, &collected) {
					break
				}
				if err != nil {
					yield(Change{}, err)
					return
				}
				yielded = true
				if !yield(c, nil) {
					return
				}
			}
			if collected == nil {
				return
			}
			g, err := table.ReadGroup(ctx, b, group)
			if err != nil {
				yield(Change{}, errors.Join(collected, err))
				return
			}
			moved := false
			for p, at := range pos {
				if p < len(g.Positions) && g.Positions[p] > at {
					pos[p], moved = g.Positions[p], true
				}
			}
			if !moved {
				yield(Change{}, collected)
				return
			}
		}
	}
}

// record moves the positions of partitions to through: their units
// through it were delivered.
func record(g *table.Group, partitions []int, through uint64) {
	if plant.On(plant.GroupRecordsEveryPartition) {
		partitions = make([]int, len(g.Positions))
		for p := range partitions {
			partitions[p] = p
		}
	}
	for _, p := range partitions {
		if p >= 0 && p < len(g.Positions) {
			g.Positions[p] = max(g.Positions[p], through)
		}
	}
}

// claim writes the group's next state with the member's claim renewed,
// the lapsed members' dropped, and edit's changes.
func (m *groupMember) claim(ctx context.Context, edit func(g *table.Group)) error {
	now := m.now()
	fresh := func() (*table.Group, error) {
		if m.opts.Partitions > table.MaxGroupPartitions {
			return nil, fmt.Errorf("changes: a group of %d partitions: at most %d", m.opts.Partitions, table.MaxGroupPartitions)
		}
		if err := table.CheckGroupStart(ctx, m.b, m.opts.From); err != nil {
			return nil, err
		}
		g := &table.Group{Partitions: m.opts.Partitions, Members: map[string]time.Time{}, Positions: make([]uint64, m.opts.Partitions)}
		for i := range g.Positions {
			g.Positions[i] = m.opts.From
		}
		return g, nil
	}
	g, err := table.UpdateGroup(ctx, m.b, m.group, m.g, fresh, func(g *table.Group) bool {
		for other, until := range g.Members {
			if !now.Before(until) {
				delete(g.Members, other)
			}
		}
		g.Members[m.name] = now.Add(m.opts.Lease).UTC()
		g.Rebalance(now)
		if edit != nil {
			edit(g)
		}
		return true
	})
	if err != nil {
		return err
	}
	m.g, m.renewed = g, now
	return nil
}

// leave gives the member's partitions back: its claim is dropped from the
// group's next state (even when ctx ended; best effort, for a few
// seconds), so that the others take them at their next look.
func (m *groupMember) leave(ctx context.Context) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	_ = m.leaveErr(ctx)
}

func (m *groupMember) leaveErr(ctx context.Context) error {
	_, err := table.UpdateGroup(ctx, m.b, m.group, m.g, nil, func(g *table.Group) bool {
		if _, ok := g.Members[m.name]; !ok {
			return false
		}
		delete(g.Members, m.name)
		g.Rebalance(m.now())
		return true
	})
	return err
}

// emitOwned emits the units of version cur that owns says a group's member
// reads, each alone so that its rows are known by their unit: the
// version's deletes (and rows a restore brings back) as one, through
// deletes, and each fragment it adds as another.
func emitOwned(owns func(v, unit uint64) bool, cur *format.Manifest, emit func(uint64, ChangeKind, *format.Manifest, []format.Fragment, map[uint64][]uint32) bool,
	deletes func(unit uint64) bool, added []format.Fragment, quietAdds bool) bool {
	v := cur.Version
	if u := deleteUnit(added); owns(v, u) && !deletes(u) {
		return false
	}
	if quietAdds {
		return true
	}
	for _, f := range added {
		if owns(v, f.ID) && !emit(f.ID, ChangeInsert, cur, []format.Fragment{f}, nil) {
			return false
		}
	}
	return true
}

// WithUnitColumn returns rec (a change's rows, as WithChangeColumns makes
// them) with the column _unit holding unit in every row: a group's
// member's rows, named by what a sink keys them by with _version.
func WithUnitColumn(rec arrow.RecordBatch, unit uint64, mem memory.Allocator) arrow.RecordBatch {
	if mem == nil {
		mem = memory.DefaultAllocator
	}
	ub := array.NewUint64Builder(mem)
	defer ub.Release()
	for range rec.NumRows() {
		ub.Append(unit)
	}
	u := ub.NewArray()
	defer u.Release()
	fields := append(slices.Clone(rec.Schema().Fields()), arrow.Field{Name: evolve.UnitColumn, Type: arrow.PrimitiveTypes.Uint64})
	return array.NewRecordBatch(arrow.NewSchema(fields, nil), append(slices.Clone(rec.Columns()), u), rec.NumRows())
}

// deleteUnit is the unit of change a version's deletes belong to: the
// lowest id of the fragments it adds (an upsert's deletes go with its
// inserts), or 0 when it adds none.
func deleteUnit(added []format.Fragment) uint64 {
	if len(added) == 0 {
		return 0
	}
	u := added[0].ID
	for _, f := range added[1:] {
		u = min(u, f.ID)
	}
	return u
}
