package walshard

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/table"
)

// A worker that dies for good (an autoscaled pod that never comes back
// under its name) leaves acknowledged rows in its WAL that only it would
// have flushed. Adoption does what its restart would: a shard whose owner
// has written nothing for longer than an adoption age, and which holds
// rows not yet in the table, is opened by another process — a new epoch,
// so the old owner is fenced should it wake — its WAL replayed into a
// generation, merged, and its log cleaned. If the owner comes back under
// the same name, it opens the next epoch over the state the adopter left:
// nothing to replay, nothing lost, nothing twice.

// Abandoned describes a shard that looks abandoned.
type Abandoned struct {
	Shard        string
	LastWrite    time.Time // its newest WAL entry or state
	WALEnd       uint64    // its newest WAL position
	WALFlushed   uint64    // its newest state's flushed position
	UnmergedGens int       // generations above the table's watermark
}

// Shards lists a table's shards: those registered under _fleet/shards/
// and those the table has merged from. One LIST page per thousand.
func Shards(ctx context.Context, b blob.Bucket, m *table.Manifest) ([]string, error) {
	seen := map[string]bool{}
	for id := range m.Shards {
		seen[id] = true
	}
	for o, err := range blob.List(ctx, b, table.FleetShardsDir, 0) {
		if err != nil {
			return nil, err
		}
		if id := strings.TrimPrefix(o.Key, table.FleetShardsDir); CheckShardID(id) == nil {
			seen[id] = true
		}
	}
	out := make([]string, 0, len(seen))
	for id := range seen {
		out = append(out, id)
	}
	slices.Sort(out)
	return out, nil
}

// FindAbandoned lists the shards whose owner has written nothing since
// before now-after and which hold rows not in the table: WAL entries
// above their flushed position, or generations above the watermark.
// It costs two LISTs a shard, and a LIST and a GET more for each quiet
// one.
func FindAbandoned(ctx context.Context, b blob.Bucket, after time.Duration, now time.Time) ([]Abandoned, error) {
	m, err := table.ReadLatest(ctx, b)
	if err != nil {
		return nil, err
	}
	ids, err := Shards(ctx, b, m)
	if err != nil {
		return nil, err
	}
	found := make([]*Abandoned, len(ids))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(32)
	for i, id := range ids {
		g.Go(func() error {
			l := newLayout(id)
			last, end, err := lastActivity(gctx, b, l)
			if err != nil || last.IsZero() || now.Sub(last) < after {
				return err
			}
			st, err := readState(gctx, b, l)
			if err != nil {
				return fmt.Errorf("shard %q: %w", id, err)
			}
			unmerged := len(st.pending(m.Shards[id].Watermark))
			if end > st.WALFlushed || unmerged > 0 {
				found[i] = &Abandoned{Shard: id, LastWrite: last, WALEnd: end, WALFlushed: st.WALFlushed, UnmergedGens: unmerged}
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	var out []Abandoned
	for _, a := range found {
		if a != nil {
			out = append(out, *a)
		}
	}
	return out, nil
}

// AdoptResult says what an adoption did.
type AdoptResult struct {
	Shard       string
	Epoch       uint64 // the epoch the adopter claimed
	Rows        int64  // rows replayed from the WAL
	Generations int    // generations merged
	Version     uint64 // the table version that holds them (0: none)
	// SetAside: the entries replay set aside (quarantined, or lost and
	// given up under Options.SetAsideLost).
	SetAside []Quarantined
}

// Adopt opens shard as its owner would on a restart (fencing any earlier
// one), flushes what it replays, merges every generation awaiting merge,
// cleans its log, and closes it. o.Shard is set here; o.Commit.Writer
// names the adopter.
func Adopt(ctx context.Context, b blob.Bucket, shard string, o Options) (AdoptResult, error) {
	o.Shard = shard
	o.MergeInterval, o.FlushInterval = 0, 0
	if o.Commit.Writer == "" {
		o.Commit.Writer = "adopter"
	}
	res := AdoptResult{Shard: shard}
	s, err := Open(ctx, b, &o)
	if err != nil {
		return res, err
	}
	defer s.Close()
	res.Epoch = s.Epoch()
	st := s.Stats()
	res.Rows, res.SetAside = st.MemtableRows, st.Quarantined
	if _, err := s.Flush(ctx); err != nil {
		return res, err
	}
	for {
		mr, err := s.Merge(ctx)
		if err != nil && !errors.Is(err, ErrMergeRunning) {
			return res, err
		}
		res.Generations += mr.Generations
		if mr.Version != 0 && !mr.Done {
			res.Version = mr.Version
		}
		if mr.Generations == 0 && s.Stats().PendingGenerations == 0 {
			return res, nil
		}
	}
}
