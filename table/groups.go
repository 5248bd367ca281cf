package table

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/table/format"
)

// GroupsDir holds the consumer groups' states: _refs/groups/<group>/<seq>.json,
// each state created once (put-if-absent) as the next of its group, as a
// version's manifest is.
const GroupsDir = "_refs/groups/"

// DefaultGroupPartitions is how many partitions a group's units are
// hashed into when its first member does not say; MaxGroupPartitions
// bounds it (each state holds a position and an owner a partition).
const (
	DefaultGroupPartitions = 64
	MaxGroupPartitions     = 4096
)

// groupStatesKept is how many of a group's newest states stay; the writer
// of a state deletes the one this many before it.
const groupStatesKept = 8

// Group is one state of a consumer group: the members that follow the
// table together, each with the time its claim lapses, and for each
// partition of the units of change (GroupPartition) the version through
// which every unit of that partition was delivered to a member.
//
// Each state gives every partition to a live member (Rebalance), moving
// few when members come and go.
//
// Invariant: a partition's position only moves forward, and only to a
// version through which a member delivered every unit of the partition
// from a position the state held before; so every unit at or below a
// position was delivered, whoever wrote it, and a member that lost its
// partitions (stalled past its lease) can still only move positions to
// what it delivered. Which member owns a partition (Owner) spreads the
// work; it is not what makes delivery whole.
type Group struct {
	Name       string               `json:"name"`
	ID         string               `json:"id"` // random, made with the group's first state: a share of another group of the name is told apart
	Seq        uint64               `json:"seq"`
	Partitions int                  `json:"partitions"`
	Members    map[string]time.Time `json:"members"` // member: when its claim lapses
	Positions  []uint64             `json:"positions"`
	Owners     []string             `json:"owners"` // per partition: the member it is given to ("" none)
	Updated    time.Time            `json:"updated"`
	Writer     string               `json:"writer"` // a random id of the write, to know it again after a lost answer
}

// GroupKey names state seq of group name.
func GroupKey(name string, seq uint64) string {
	return fmt.Sprintf("%s%s/%020d.json", GroupsDir, name, seq)
}

// GroupPartition is the partition of the unit of change (version v,
// unit u) in a group of n partitions: FNV-1a (64 bits) of v then u, each
// 8 bytes little-endian, modulo n.
func GroupPartition(v, u uint64, n int) int {
	h := fnv.New64a()
	var b [16]byte
	binary.LittleEndian.PutUint64(b[:8], v)
	binary.LittleEndian.PutUint64(b[8:], u)
	h.Write(b[:])
	return int(h.Sum64() % uint64(n))
}

// Live is the members whose claim has not lapsed at now, sorted.
func (g *Group) Live(now time.Time) []string {
	var out []string
	for m, until := range g.Members {
		if now.Before(until) {
			out = append(out, m)
		}
	}
	slices.Sort(out)
	return out
}

// Owner is the member partition p is given to, when it is live at now
// ("" when none is).
func (g *Group) Owner(p int, now time.Time) string {
	if p >= len(g.Owners) || !now.Before(g.Members[g.Owners[p]]) {
		return ""
	}
	return g.Owners[p]
}

// Owned is the partitions member owns at now.
func (g *Group) Owned(member string, now time.Time) []int {
	var out []int
	for p := range g.Owners {
		if g.Owners[p] == member && g.Owner(p, now) == member {
			out = append(out, p)
		}
	}
	return out
}

// Rebalance gives the partitions to the members live at now, moving as
// few as it can: a lapsed member's go to the live ones with the fewest,
// and a member over its share (the partitions divided by the members,
// one more for as many as the division leaves over, those holding most
// first) gives the excess back to the others. Each member then holds its
// share, within one of the others'.
func (g *Group) Rebalance(now time.Time) {
	if len(g.Owners) != g.Partitions {
		g.Owners = make([]string, g.Partitions)
	}
	live := g.Live(now)
	count := make(map[string]int, len(live))
	for _, m := range live {
		count[m] = 0
	}
	for p, o := range g.Owners {
		if _, ok := count[o]; ok {
			count[o]++
		} else {
			g.Owners[p] = ""
		}
	}
	if len(live) == 0 {
		return
	}
	order := slices.Clone(live)
	slices.SortStableFunc(order, func(a, b string) int { return count[b] - count[a] })
	share := make(map[string]int, len(live))
	for i, m := range order {
		share[m] = g.Partitions / len(live)
		if i < g.Partitions%len(live) {
			share[m]++
		}
	}
	for p := len(g.Owners) - 1; p >= 0; p-- {
		if o := g.Owners[p]; o != "" && count[o] > share[o] {
			g.Owners[p] = ""
			count[o]--
		}
	}
	for p, o := range g.Owners {
		if o != "" {
			continue
		}
		for _, m := range order {
			if count[m] < share[m] {
				g.Owners[p] = m
				count[m]++
				break
			}
		}
	}
}

// Slowest is the lowest position of the group's partitions: every change
// through it was delivered.
func (g *Group) Slowest() uint64 {
	return slices.Min(g.Positions)
}

func (g *Group) clone() *Group {
	c := *g
	c.Members = make(map[string]time.Time, len(g.Members))
	for m, t := range g.Members {
		c.Members[m] = t
	}
	c.Positions = slices.Clone(g.Positions)
	c.Owners = slices.Clone(g.Owners)
	return &c
}

// ReadGroup reads the newest state of group name (ErrNotFound when it
// has none).
func ReadGroup(ctx context.Context, b blob.Bucket, name string) (*Group, error) {
	if err := checkRefName("group", name); err != nil {
		return nil, err
	}
	for range 5 {
		newest, err := newestGroupKey(ctx, b, name, "")
		if err != nil {
			return nil, err
		}
		if newest == "" {
			return nil, fmt.Errorf("table: group %q: %w", name, format.ErrNotFound)
		}
		g, err := readGroupState(ctx, b, newest)
		if errors.Is(err, blob.ErrNotFound) {
			continue // deleted since the listing: a newer one is there
		}
		return g, err
	}
	return nil, fmt.Errorf("table: group %q: its states change faster than they are listed", name)
}

// isGroupStateKey tells a state's key (20 digits, .json) from any other
// object someone put in a group's folder, which is not the group's.
func isGroupStateKey(key string) bool {
	base := key[strings.LastIndexByte(key, '/')+1:]
	digits, ok := strings.CutSuffix(base, ".json")
	if !ok || len(digits) != 20 {
		return false
	}
	for _, c := range digits {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// newestGroupKey is the key of group name's newest state ("" when none),
// at least (when not "") since: the newest listed, then the states after
// it found by name (a listing may lag behind the newest creates).
func newestGroupKey(ctx context.Context, b blob.Bucket, name, since string) (string, error) {
	newest := since
	for o, err := range blob.List(ctx, b, GroupsDir+name+"/", 0) {
		if err != nil {
			return "", err
		}
		if isGroupStateKey(o.Key) && o.Key > newest {
			newest = o.Key
		}
	}
	if newest == "" {
		return "", nil
	}
	seq, err := strconv.ParseUint(strings.TrimSuffix(newest[strings.LastIndexByte(newest, '/')+1:], ".json"), 10, 64)
	if err != nil {
		return "", format.Corrupt(newest, "not a consumer group's state", err)
	}
	for {
		next := GroupKey(name, seq+1)
		if _, err := b.Attributes(ctx, next); errors.Is(err, blob.ErrNotFound) {
			return newest, nil
		} else if err != nil {
			return "", err
		}
		newest, seq = next, seq+1
	}
}

func readGroupState(ctx context.Context, b blob.Bucket, key string) (*Group, error) {
	data, err := b.Get(ctx, key)
	if err != nil {
		return nil, err
	}
	var g Group
	if err := json.Unmarshal(data, &g); err != nil || g.Partitions < 1 || g.Partitions > MaxGroupPartitions || len(g.Positions) != g.Partitions || GroupKey(g.Name, g.Seq) != key {
		return nil, format.Corrupt(key, "not a consumer group's state", err)
	}
	return &g, nil
}

// Groups lists every consumer group's newest state.
func Groups(ctx context.Context, b blob.Bucket) ([]*Group, error) {
	var names []string
	for o, err := range blob.List(ctx, b, GroupsDir, 0) {
		if err != nil {
			return nil, err
		}
		name, _, ok := strings.Cut(o.Key[len(GroupsDir):], "/")
		if ok && isGroupStateKey(o.Key) && (len(names) == 0 || names[len(names)-1] != name) {
			names = append(names, name)
		}
	}
	var out []*Group
	for _, name := range slices.Compact(names) {
		g, err := ReadGroup(ctx, b, name)
		if errors.Is(err, format.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		out = append(out, g)
	}
	return out, nil
}

// UpdateGroup writes the next state of group name: change edits a copy of
// the newest (have, when not nil, is taken for it until a newer one is
// found) and says whether there is anything to write. A group with no
// state yet starts as new makes it. On a lost race it reads the newer
// state and edits that. It returns the state written, or the newest when
// there was nothing to write. A state counts once it is the newest listed:
// a writer that knew an old state may create a number already written and
// deleted, and such a state is ignored (readers take the newest).
func UpdateGroup(ctx context.Context, b blob.Bucket, name string, have *Group, fresh func() (*Group, error), change func(g *Group) bool) (*Group, error) {
	if err := checkRefName("group", name); err != nil {
		return nil, err
	}
	cur := have
	for attempt := 0; ; attempt++ {
		if cur == nil {
			g, err := ReadGroup(ctx, b, name)
			switch {
			case errors.Is(err, format.ErrNotFound) && fresh == nil:
				return nil, err
			case errors.Is(err, format.ErrNotFound):
				if g, err = fresh(); err != nil {
					return nil, err
				}
				g.Name, g.Seq, g.ID = name, 0, format.NewID() // the first state written is 1
			case err != nil:
				return nil, err
			}
			cur = g
		}
		next := cur.clone()
		if !change(next) {
			return cur, nil
		}
		next.Seq, next.Updated, next.Writer = cur.Seq+1, time.Now().UTC(), format.NewID()
		data, err := json.Marshal(next)
		if err != nil {
			return nil, err
		}
		key := GroupKey(name, next.Seq)
		err = b.PutIfAbsent(ctx, key, data)
		if err != nil && !errors.Is(err, blob.ErrExists) {
			// The answer was lost: the state is ours if it is there
			// with our writer's id.
			if got, rerr := readGroupState(ctx, b, key); rerr == nil && got.Writer == next.Writer {
				err = nil
			} else if rerr == nil || errors.Is(rerr, blob.ErrNotFound) {
				err = blob.ErrExists // someone else's, or none: try again from the newest
			}
		}
		if err == nil {
			// A writer that knew an old state may have made a number
			// whose state was written and then deleted (the newest
			// states are kept): its state counts only when it is the
			// newest. Otherwise it is edited again from the newest.
			newest, lerr := newestGroupKey(ctx, b, name, key)
			if lerr != nil {
				return nil, lerr
			}
			if newest != key {
				_ = b.Delete(ctx, key) // a number used and deleted before: not the group's
				err = blob.ErrExists
			}
		}
		if err == nil {
			if next.Seq > groupStatesKept {
				_ = b.Delete(ctx, GroupKey(name, next.Seq-groupStatesKept))
			}
			return next, nil
		}
		if !errors.Is(err, blob.ErrExists) {
			return nil, err
		}
		if attempt >= 100 {
			return nil, fmt.Errorf("table: group %q: lost the race for its next state %d times", name, attempt+1)
		}
		cur = nil
	}
}

// NewerGroupState reads state seq+1 of group name when there is one
// (nil, nil when not): one GET, to learn of another member's write.
func NewerGroupState(ctx context.Context, b blob.Bucket, g *Group) (*Group, error) {
	_, err := readGroupState(ctx, b, GroupKey(g.Name, g.Seq+1))
	if errors.Is(err, blob.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	// It may have a newer one still: the newest is what counts.
	return ReadGroup(ctx, b, g.Name)
}

// CheckGroupStart refuses to start a group after version from when the
// changes after it cannot be read: from is past the latest version
// (format.ErrVersionNotFound), or garbage collection took a version after
// it (a *format.ChangesCollectedError naming the oldest left), so that no
// state pins the collection on versions no member can read.
func CheckGroupStart(ctx context.Context, b blob.Bucket, from uint64) error {
	latest, err := LatestVersion(ctx, b)
	if err != nil {
		return err
	}
	if from > latest {
		return fmt.Errorf("table: a group starting after version %d: the latest version is %d: %w", from, latest, format.ErrVersionNotFound)
	}
	boundary, err := GCBoundary(ctx, b)
	if err != nil {
		return err
	}
	if boundary > 0 && from <= boundary { // from's manifest, or version 1 after the creation, is gone
		return &format.ChangesCollectedError{Version: from, Oldest: boundary + 1}
	}
	return nil
}

// DeleteGroup deletes group name's states (ErrNotFound when it has none):
// its positions go, and garbage collection no longer holds what it has not
// read. A member still following makes the group again from its own view;
// stop the members first.
func DeleteGroup(ctx context.Context, b blob.Bucket, name string) error {
	if err := checkRefName("group", name); err != nil {
		return err
	}
	found := false
	for o, err := range blob.List(ctx, b, GroupsDir+name+"/", 0) {
		if err != nil {
			return err
		}
		if err := b.Delete(ctx, o.Key); err != nil && !errors.Is(err, blob.ErrNotFound) {
			return err
		}
		found = true
	}
	if !found {
		return fmt.Errorf("table: group %q: %w", name, format.ErrNotFound)
	}
	return nil
}

// CheckMemberName refuses a group member's name that is not a ref's
// (letters, digits, '-', '_' and '.').
func CheckMemberName(name string) error { return checkRefName("group member", name) }

// ConsumersAndGroups is the named consumers and each consumer group as
// the consumer at its slowest partition's position ("group NAME"), which
// holds garbage collection back as the group does (positions only move
// forward).
func ConsumersAndGroups(ctx context.Context, b blob.Bucket) ([]Consumer, error) {
	out, err := Consumers(ctx, b)
	if err != nil {
		return nil, err
	}
	groups, err := Groups(ctx, b)
	if err != nil {
		return nil, err
	}
	for _, g := range groups {
		out = append(out, Consumer{Name: "group " + g.Name, Version: g.Slowest(), Updated: g.Updated})
	}
	return out, nil
}
