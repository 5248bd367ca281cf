package changes

import (
	"context"
	"fmt"
	"iter"
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
}

// String is the share as a token: "V:p,p,…".
func (s GroupShare) String() string {
	parts := make([]string, len(s.Partitions))
	for i, p := range s.Partitions {
		parts[i] = strconv.Itoa(p)
	}
	return fmt.Sprintf("%d:%s", s.Through, strings.Join(parts, ","))
}

// ParseGroupShare reads a share's token.
func ParseGroupShare(tok string) (GroupShare, error) {
	v, ps, ok := strings.Cut(tok, ":")
	through, err := strconv.ParseUint(v, 10, 64)
	if !ok || err != nil {
		return GroupShare{}, fmt.Errorf("changes: %q is not a group share (V:p,p,…)", tok)
	}
	s := GroupShare{Through: through}
	for f := range strings.SplitSeq(ps, ",") {
		if f == "" {
			continue
		}
		p, err := strconv.Atoi(f)
		if err != nil || p < 0 {
			return GroupShare{}, fmt.Errorf("changes: %q is not a group share (V:p,p,…)", tok)
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
	from  uint64
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
	err := m.claim(ctx, func(g *table.Group) {
		if done != nil {
			record(g, done.Partitions, done.Through)
		}
	})
	if err != nil {
		return nil, err
	}
	gr := &GroupRead{b: b, group: group, n: m.g.Partitions, pos: map[int]uint64{}, from: 1<<64 - 1}
	owned := m.g.Owned(member, m.now())
	for _, p := range owned {
		gr.pos[p] = m.g.Positions[p]
		gr.from = min(gr.from, gr.pos[p])
	}
	if len(owned) == 0 {
		return gr, nil
	}
	deadline := time.Now().Add(wait)
	for {
		latest, err := table.LatestVersion(ctx, b)
		if err != nil {
			return nil, err
		}
		if latest > gr.from {
			gr.Share = GroupShare{Through: latest, Partitions: owned}
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
	return func(yield func(arrow.RecordBatch, error) bool) {
		for c, err := range changes {
			if err != nil {
				yield(nil, err)
				return
			}
			if c.Kind == ChangeThrough {
				continue
			}
			rec := WithChangeColumns(c, mem)
			out := WithUnitColumn(rec, c.Unit, mem)
			rec.Release()
			more := yield(out, nil)
			out.Release()
			if !more {
				return
			}
		}
	}
}
