package walshard

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/table"
	"github.com/stratadb/strata/table/format"
	"github.com/stratadb/strata/walshard/fleetmerge"
	"github.com/stratadb/strata/walshard/wal"
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
//
// An adoption is done once: it records the WAL as flushed up to its own
// fence and takes the shard's registration down, so that later sweeps
// neither adopt the shard again (a new epoch, a fence, a history entry
// each time) nor spend a request on it, until a new owner opens it.

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
func Shards(ctx context.Context, b blob.Bucket, m *format.Manifest) ([]string, error) {
	ids, err := fleetmerge.Registered(ctx, b)
	if err != nil {
		return nil, err
	}
	return shardsOf(m, ids), nil
}

// shardsOf returns the shards m has merged from and those registered,
// sorted, each once.
func shardsOf(m *format.Manifest, registered []string) []string {
	seen := map[string]bool{}
	for id := range m.Shards {
		seen[id] = true
	}
	for _, id := range registered {
		seen[id] = true
	}
	out := make([]string, 0, len(seen))
	for id := range seen {
		out = append(out, id)
	}
	slices.Sort(out)
	return out
}

// FindAbandoned lists the shards whose owner has written nothing since
// before now-after and which hold rows not in the table: WAL entries
// above their flushed position, or generations above the watermark.
// It looks among the registered shards (_fleet/shards/, one LIST page per
// thousand): every owner registers its shard when it opens it, before it
// writes, and an adoption that leaves nothing in a shard takes its
// registration down (Adopt), so that an adopted shard costs later sweeps
// nothing. It lists every shard's flush objects (a LIST page per thousand)
// and passes over a shard that flushed since now-after; it costs two LISTs
// more for each other registered shard, and a LIST and a GET more for each
// quiet one.
func FindAbandoned(ctx context.Context, b blob.Bucket, after time.Duration, now time.Time) ([]Abandoned, error) {
	m, err := table.ReadLatest(ctx, b)
	if err != nil {
		return nil, err
	}
	all, err := fleetmerge.Registered(ctx, b)
	if err != nil {
		return nil, err
	}
	flushes, err := wal.ListFlushes(ctx, b)
	if err != nil {
		return nil, err
	}
	var ids []string
	for _, id := range all {
		if fl := flushes[id]; fl == nil || now.Sub(fl[0].ModTime) >= after {
			ids = append(ids, id)
		}
	}
	found := make([]*Abandoned, len(ids))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(32)
	for i, id := range ids {
		g.Go(func() error {
			l := wal.NewLayout(id)
			last, end, err := fleetmerge.LastActivity(gctx, b, l)
			if err != nil || last.IsZero() || now.Sub(last) < after {
				return err
			}
			st, err := wal.ReadState(gctx, b, l)
			if err != nil {
				return fmt.Errorf("walshard: shard %q: %w", id, err)
			}
			unmerged := len(st.Pending(m.Shards[id].Watermark))
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
	// Retired: the shard held nothing more, and its registration was taken
	// down (it opens again as any shard does).
	Retired bool
}

// Adopt opens shard as its owner would on a restart (fencing any earlier
// one), flushes what it replays, merges every generation awaiting merge,
// cleans its log, and closes it. opts (nil: the defaults) is not
// changed: its Shard is shard here, and its Commit.Writer names the
// adopter.
func Adopt(ctx context.Context, b blob.Bucket, shard string, opts *Options) (AdoptResult, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
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
	// Nothing is left in the shard's log: say so where the next sweep
	// looks, in a state the merges below then record as merged, so that
	// no later fleet merge reads it again.
	if err := s.coverFence(ctx); err != nil {
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
			break
		}
	}
	res.Retired, err = retire(ctx, b, shard, s.Epoch())
	return res, err
}

// coverFence records, in a state of its own, that every WAL entry up to
// the fence this handle placed is flushed, set aside or a fence, when the
// memtable holds nothing. An adopter appends nothing, so the fence is its
// WAL's newest entry; without this, the flushed position stayed below it,
// and the adopted shard, with nothing new, looked abandoned with entries
// to replay as soon as the adoption age passed again: it was adopted at
// every later sweep, each time a new epoch and one more fence.
func (s *Shard) coverFence(ctx context.Context) error {
	s.flushMu.Lock()
	defer s.flushMu.Unlock()
	s.mu.Lock()
	state, top, watermark, empty := s.mu.gens.state, s.mu.wal.nextPos-1, s.mu.gens.watermark, len(s.mu.mem.entries) == 0
	producers := s.mu.names.producers
	s.mu.Unlock()
	if !empty || state.WALFlushed >= top {
		return nil
	}
	// The state as it stands, but its flushed position; it records the
	// idempotent appends of the entries it now covers, as a flush does.
	copied := *state
	next := &copied
	next.Seq, next.Epoch, next.ID, next.WALFlushed, next.MergedBelow = state.Seq+1, s.epoch, format.NewID(), top, watermark
	next.Generations = state.Pending(watermark)
	next.Producers = producers.Expire(s.now())
	if err := wal.WriteState(ctx, s.b, s.l, s.schema, next, nil); err != nil {
		if errors.Is(err, wal.ErrStateTaken) {
			return s.setFenced()
		}
		return fmt.Errorf("walshard: shard %q: recording the flushed position %d: %w", s.id, top, err)
	}
	s.mu.Lock()
	s.mu.gens.state, s.mu.gens.stateAt = next, s.now()
	s.mu.Unlock()
	return nil
}

// retire takes down the registration of a shard an adoption at epoch left
// with nothing in it, so that sweeps for abandoned shards (FindAbandoned)
// no longer look at it. A new owner registers it again when it opens it,
// after claiming epoch+1 and before writing: one that claimed before the
// registration went is seen by the read of epoch+1 (by name) after it,
// and the registration is put back. It reports whether the registration
// stays down.
func retire(ctx context.Context, b blob.Bucket, shard string, epoch uint64) (bool, error) {
	key := format.FleetShardsDir + shard
	if err := b.Delete(ctx, key); err != nil && !errors.Is(err, blob.ErrNotFound) {
		return false, fmt.Errorf("walshard: shard %q: retiring it: %w", shard, err)
	}
	_, err := b.Attributes(ctx, format.ShardEpochKey(shard, epoch+1))
	if errors.Is(err, blob.ErrNotFound) {
		return true, nil
	}
	// A newer owner, or no answer: the registration goes back.
	if perr := b.PutIfAbsent(ctx, key, nil); perr != nil && !errors.Is(perr, blob.ErrExists) {
		return false, fmt.Errorf("walshard: shard %q: registering it again after a retirement: %w", shard, errors.Join(err, perr))
	}
	return false, nil
}
