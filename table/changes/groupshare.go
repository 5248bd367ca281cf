package changes

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/table"
)

// GroupShare is what one read of a member's share covered: every unit of
// its Partitions in the versions after their positions through Through.
// A member that comes and goes with each request (over HTTP) hands it
// back with its next read, once done with the rows, and the positions
// are then recorded (ReadGroupShare).
type GroupShare struct {
	Through    uint64
	Partitions []int
	Group      string // the group's ID (table.Group.ID): a share of another group of the name is refused
}

// ErrBadShare: a share handed back is not one this group gave out: its
// group is another (one made again under the name), or it names a
// version past the latest or a partition the group lacks.
var ErrBadShare = errors.New("not a share of this group")

// String is the share as a token: "V:p,p,…:ID".
func (s GroupShare) String() string {
	parts := make([]string, len(s.Partitions))
	for i, p := range s.Partitions {
		parts[i] = strconv.Itoa(p)
	}
	return fmt.Sprintf("%d:%s:%s", s.Through, strings.Join(parts, ","), s.Group)
}

// ParseGroupShare reads a share's token.
func ParseGroupShare(tok string) (GroupShare, error) {
	fields := strings.Split(tok, ":")
	bad := fmt.Errorf("changes: %q is not a group share (V:p,p,…:ID, as Strata-Group-Ack gives it): %w", tok, ErrBadShare)
	if len(fields) != 3 || fields[2] == "" {
		return GroupShare{}, bad
	}
	through, err := strconv.ParseUint(fields[0], 10, 64)
	if err != nil {
		return GroupShare{}, bad
	}
	s := GroupShare{Through: through, Group: fields[2]}
	for f := range strings.SplitSeq(fields[1], ",") {
		if f == "" {
			continue
		}
		p, err := strconv.Atoi(f)
		if err != nil || p < 0 || p >= table.MaxGroupPartitions {
			return GroupShare{}, bad
		}
		s.Partitions = append(s.Partitions, p)
	}
	return s, nil
}

// GroupRead is one read of a member's share: Share is what it covers
// (no partitions when there is nothing to read), Changes its rows.
type GroupRead struct {
	Share GroupShare
	b     blob.Bucket
	group string
	pos   map[int]uint64
	n     int
}

// Changes yields the changes of the read's units (each with its unit),
// read with co.
func (gr *GroupRead) Changes(ctx context.Context, co ChangesOptions) iter.Seq2[Change, error] {
	if len(gr.Share.Partitions) == 0 {
		return func(func(Change, error) bool) {}
	}
	return shareChanges(ctx, gr.b, gr.group, gr.n, gr.pos, gr.Share.Through, co)
}

// ReadGroupShare is one read of member's share of group, for a member that
// comes and goes with each request: it renews the member's claim (joining
// the group when it is not in it), records done (the share of its last
// read, which it is done with; nil for none) as FollowGroup records a
// run's, and waits up to wait for a version past its partitions'
// positions. A partition of done no longer the member's is recorded all
// the same: positions only ever move to what was delivered.
func ReadGroupShare(ctx context.Context, b blob.Bucket, group, member string, opts GroupOptions, done *GroupShare, wait time.Duration) (*GroupRead, error) {
	if err := table.CheckMemberName(member); err != nil {
		return nil, err
	}
	if opts.Lease <= 0 {
		opts.Lease = 30 * time.Second
	}
	if opts.Partitions <= 0 {
		opts.Partitions = table.DefaultGroupPartitions
	}
	m := &groupMember{b: b, group: group, name: member, opts: opts}
	if done != nil {
		// A share names what was delivered: never past the latest version.
		latest, err := table.LatestVersion(ctx, b)
		if err != nil {
			return nil, err
		}
		if done.Through > latest {
			return nil, fmt.Errorf("changes: a share through version %d: the latest is %d: %w", done.Through, latest, ErrBadShare)
		}
	}
	var badShare error
	err := m.claim(ctx, func(g *table.Group) {
		badShare = nil
		if done == nil {
			return
		}
		if done.Group != g.ID || slices.ContainsFunc(done.Partitions, func(p int) bool { return p >= g.Partitions }) {
			badShare = fmt.Errorf("changes: group %q (%s) did not give out share %s: %w", group, g.ID, done, ErrBadShare)
			return
		}
		record(g, done.Partitions, done.Through)
	})
	if err == nil {
		err = badShare
	}
	if err != nil {
		return nil, err
	}
	pos, from := m.positions()
	gr := &GroupRead{b: b, group: group, n: m.g.Partitions, pos: pos}
	deadline := time.Now().Add(wait)
	if len(pos) == 0 {
		// Nothing to read (more members than partitions): the wait
		// asked for, rather than a member that asks again at once.
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(wait):
		}
		return gr, nil
	}
	for {
		latest, err := table.LatestVersion(ctx, b)
		if err != nil {
			return nil, err
		}
		if latest > from {
			gr.Share = GroupShare{Through: latest, Partitions: slices.Sorted(maps.Keys(pos)), Group: m.g.ID}
			return gr, nil
		}
		if !time.Now().Before(deadline) {
			return gr, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(min(100*time.Millisecond, time.Until(deadline))):
		}
	}
}

// LeaveGroup drops member's claim from group's next state: its partitions
// go to the others at once. now is the clock (nil: time.Now).
func LeaveGroup(ctx context.Context, b blob.Bucket, group, member string, now func() time.Time) error {
	if err := table.CheckMemberName(member); err != nil {
		return err
	}
	m := &groupMember{b: b, group: group, name: member, opts: GroupOptions{Now: now}}
	return m.leaveErr(ctx)
}

// GroupRows is ChangeRows with the unit column (WithUnitColumn) after the
// change's two.
func GroupRows(changes iter.Seq2[Change, error], mem memory.Allocator) iter.Seq2[arrow.RecordBatch, error] {
	return changeRows(changes, mem, true)
}
