package walshard

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/table/format"
	"github.com/stratadb/strata/walshard/wal"
)

// replay reads the data entries in (from, to) into the memtable.
//
// It reads every position by name rather than listing the WAL: positions
// above the flushed one are dense (a writer moves to the next position
// only once an entry has landed, and the fence took the first free one),
// and a listing may not show an entry created a moment ago on a store
// whose listings lag behind its writes, while a read by name does. So a
// missing position is a lost entry: a *MissingEntryError. An entry whose
// rows the table cannot take is quarantined (see quarantine) and skipped.
func (s *Shard) replay(ctx context.Context, from, to uint64) error {
	for pos := from + 1; pos < to; pos++ {
		err := s.replayEntry(ctx, pos)
		if errors.Is(err, blob.ErrNotFound) {
			strays, serr := s.straysAbove(ctx, from, pos, to)
			if serr != nil {
				return serr
			}
			if strays {
				return nil
			}
			err = &MissingEntryError{Shard: s.id, Position: pos, Key: s.l.WalKey(pos), End: to}
		}
		if err != nil && s.opts.SetAsideLost && (errors.Is(err, ErrMissingEntry) || errors.Is(err, wal.ErrCorruptEntry)) {
			err = s.setAside(ctx, pos, err)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// straysAbove tells whether what lies in (gap, to), above the missing
// position gap, was all written by owners older than a fence in (from,
// gap): entries of a fenced owner that landed above a newer owner's
// fence. An owner's fence takes the first free position, where the owner
// before it writes next, so such an entry exists only where garbage
// collection retired the shard's log from under its fence: the newer
// owner fenced a log the collection had emptied, below where the older
// one went on writing. That owner, quiet as a retired shard's is, read
// the claims after its write and found the newer one: it acknowledged
// none of them. Read only on a missing position.
func (s *Shard) straysAbove(ctx context.Context, from, gap, to uint64) (bool, error) {
	var fence uint64
	for pos := from + 1; pos < gap; pos++ {
		e, err := s.readEntry(ctx, pos, true)
		if err != nil {
			return false, nil
		}
		if e.Kind == wal.KindFence && e.Epoch < s.epoch { // not this handle's own set-aside fences
			fence = max(fence, e.Epoch)
		}
	}
	if fence == 0 {
		return false, nil
	}
	for pos := gap + 1; pos < to; pos++ {
		e, err := s.readEntry(ctx, pos, true)
		if errors.Is(err, blob.ErrNotFound) {
			continue
		}
		if err != nil || e.Epoch >= fence {
			return false, err
		}
	}
	return true, nil
}

// setAside gives up the entry at pos, missing or damaged (lost, its
// cause), for an operator's repair (Options.SetAsideLost): quarantine/
// gets a copy of what is there, or a note that nothing was, and the
// position a fence of this epoch. Only this owner writes below its fence,
// so nothing else can take the position meanwhile.
func (s *Shard) setAside(ctx context.Context, pos uint64, lost error) error {
	key := s.l.WalKey(pos)
	data, err := s.b.Get(ctx, key)
	switch {
	case errors.Is(err, blob.ErrNotFound):
		data = []byte(fmt.Sprintf("strata: WAL entry %s was missing when a repair set it aside at %s; its rows are lost\n", key, time.Now().UTC().Format(time.RFC3339)))
	case err != nil:
		return err
	}
	qkey, err := s.keepAside(ctx, pos, data)
	if err != nil {
		return err
	}
	if err := s.b.Delete(ctx, key); err != nil && !errors.Is(err, blob.ErrNotFound) {
		return fmt.Errorf("walshard: shard %q: setting aside WAL entry %d: %w", s.id, pos, err)
	}
	fence, _ := wal.EncodeEntry(&wal.Entry{Kind: wal.KindFence, Epoch: s.epoch, Position: pos, Id: format.NewID()}, s.schema, false)
	if err := s.b.PutIfAbsent(ctx, key, fence); err != nil {
		// There already: a fence from an attempt of ours whose answer was
		// lost will do; anything else is not ours to overwrite.
		if e, rerr := s.readEntry(ctx, pos, true); !errors.Is(err, blob.ErrExists) || rerr != nil || e.Kind != wal.KindFence {
			return fmt.Errorf("walshard: shard %q: fencing set-aside WAL position %d: %w", s.id, pos, err)
		}
	}
	why := "the entry was missing"
	var ce *wal.CorruptEntryError
	if errors.As(lost, &ce) {
		why = "the entry was corrupt: " + ce.Reason
	}
	s.recordAside(Quarantined{Position: pos, Key: qkey, Reason: "set aside by a repair, its rows lost: " + why})
	return nil
}

// replayEntry reads the WAL entry at pos and adds its rows to the
// memtable, or quarantines it when they cannot go into a generation.
func (s *Shard) replayEntry(ctx context.Context, pos uint64) error {
	e, err := s.readEntry(ctx, pos, false)
	var poison *wal.PoisonEntryError
	switch {
	case errors.As(err, &poison):
		return s.quarantine(ctx, pos, poison.Reason)
	case err != nil:
		return err
	case e.Epoch > s.epoch:
		// A newer owner wrote here while this one opened: it owns the
		// shard.
		return s.setFenced()
	case e.Kind == wal.KindData:
		s.addToMemtable(pos, e.Batches, nil, e.Appends, e.Keys)
	}
	return nil
}

// Quarantined is a WAL entry set aside: its rows could not go into a
// generation. The entry's object is kept under quarantine/ for an operator;
// the shard goes on with its other rows.
type Quarantined struct {
	Position uint64 `json:"position"`
	Key      string `json:"key"` // the copy under quarantine/
	Reason   string `json:"reason"`
}

// quarantine copies the WAL entry at pos under quarantine/ (where nothing
// deletes it) and records it; the caller leaves its rows out.
func (s *Shard) quarantine(ctx context.Context, pos uint64, reason string) error {
	data, err := s.b.Get(ctx, s.l.WalKey(pos))
	if err != nil {
		return fmt.Errorf("walshard: shard %q: quarantining WAL entry %d: %w", s.id, pos, err)
	}
	key, err := s.keepAside(ctx, pos, data)
	if err != nil {
		return err
	}
	s.recordAside(Quarantined{Position: pos, Key: key, Reason: reason})
	return nil
}

// keepAside stores data under quarantine/ for position pos and returns
// its key; a copy there already (an earlier attempt's) stays.
func (s *Shard) keepAside(ctx context.Context, pos uint64, data []byte) (string, error) {
	key := s.l.QuarantineKey(pos)
	if err := s.b.PutIfAbsent(ctx, key, data); err != nil && !errors.Is(err, blob.ErrExists) {
		return "", fmt.Errorf("walshard: shard %q: quarantining WAL entry %d: %w", s.id, pos, err)
	}
	return key, nil
}

// recordAside records an entry set aside, in the stats and to the listener.
func (s *Shard) recordAside(q Quarantined) {
	s.mu.Lock()
	s.mu.quarantined = append(s.mu.quarantined, q)
	s.mu.Unlock()
	if s.opts.Listener.Quarantine != nil {
		s.opts.Listener.Quarantine(q)
	}
}
