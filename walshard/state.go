package walshard

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/table"
)

// State is a shard's durable record, one object per change, never
// rewritten: the generations flushed and not yet known to be merged, and
// how far the WAL is covered by them.
type State struct {
	Seq   uint64 `json:"seq"`
	Epoch uint64 `json:"epoch"` // the owner that wrote it
	// Writer and ID let a writer recognise its own state object after an
	// ambiguous create.
	ID string `json:"id"`
	// WALFlushed: every WAL entry at or below it is in a generation, is a
	// fence, or was set aside (quarantined); replay starts above it.
	WALFlushed  uint64       `json:"wal_flushed"`
	NextGen     uint64       `json:"next_gen"`
	Generations []Generation `json:"generations"`
	// MergedBelow is the table's watermark for the shard as the writer
	// knew it: Generations lists every generation above it (a fresh read
	// over an older version of the table must read a newer one).
	MergedBelow uint64 `json:"merged_below,omitempty"`
	// PartsUpTo is the newest WAL position any generation has taken as a
	// part (see Part): WAL entries above it are never table fragments, so
	// the shard's cleanup may delete them once merged.
	PartsUpTo uint64 `json:"parts_up_to,omitempty"`
	// Producers records the idempotent appends of the shard (At: each
	// one's WAL position) within the window of table.Idempotency: those
	// of entries at or below WALFlushed at least; replay adds the others'
	// from their entries.
	Producers table.Producers `json:"producers,omitempty"`
}

// Generation is one flushed memtable: a Parquet object under the shard,
// or, when some of its WAL entries join the table as they are
// (Options.ReuseBytes), several objects, listed in Parts (Key is then
// empty). Rows and Bytes count all of them.
type Generation struct {
	Gen     uint64 `json:"gen"`
	Key     string `json:"key"`
	Rows    int64  `json:"rows"`
	Bytes   int64  `json:"bytes"`
	Parts   []Part `json:"parts,omitempty"`
	WALFrom uint64 `json:"wal_from"`
	WALTo   uint64 `json:"wal_to"`
	// Seq is the state that first recorded the generation (it names the
	// generation's announcement, table.PendingKey).
	Seq uint64 `json:"seq,omitempty"`
	// Columns are the generation's statistics, carried into the table
	// when the generation is merged.
	Columns []table.ColumnStats `json:"columns,omitempty"`
	// Keys are set on a generation of upserts: the key columns (stored
	// names) by which its rows replace the table's when it is merged
	// (commit.Table.MergeKeyed). It holds each key once.
	Keys []string `json:"keys,omitempty"`
}

// readState reads the newest state (Seq 0 when the shard is new).
func readState(ctx context.Context, b blob.Bucket, l layout) (*State, error) {
	page, err := b.ListPage(ctx, l.states(), "", 1)
	if err != nil {
		return nil, err
	}
	if len(page.Objects) == 0 {
		return &State{NextGen: 1}, nil
	}
	key := page.Objects[0].Key
	seq, ok := parseLast(l.states(), key)
	if !ok {
		return nil, fmt.Errorf("walshard: unexpected object %q among shard states", key)
	}
	data, err := b.Get(ctx, key)
	if err != nil {
		return nil, err
	}
	var s State
	if err := json.Unmarshal(data, &s); err != nil || s.Seq != seq {
		return nil, fmt.Errorf("walshard: shard state %q is corrupt: %v", key, err)
	}
	return &s, nil
}

// writeState creates state s at s.Seq. It returns errStateTaken when
// another writer holds that sequence number. A failure that may hide a
// landed create (a lost response, a 412 after an SDK retry) is resolved by
// reading the object back and comparing ids.
func writeState(ctx context.Context, b blob.Bucket, l layout, s *State) error {
	data, err := json.Marshal(s)
	if err != nil {
		return err
	}
	key := l.stateKey(s.Seq)
	err = b.PutIfAbsent(ctx, key, data)
	if err == nil {
		return nil
	}
	if !errors.Is(err, blob.ErrExists) && !blob.IsRetryable(err) {
		return err
	}
	got, rerr := b.Get(ctx, key)
	if errors.Is(rerr, blob.ErrNotFound) {
		return err // it did not land
	}
	if rerr != nil {
		return rerr
	}
	var other State
	if json.Unmarshal(got, &other) == nil && other.ID == s.ID {
		return nil
	}
	return errStateTaken
}

// pending returns the generations above the table's watermark.
func (s *State) pending(watermark uint64) []Generation {
	var out []Generation
	for _, g := range s.Generations {
		if g.Gen > watermark {
			out = append(out, g)
		}
	}
	return out
}

// Part is one object of a generation that has several: the generation's
// own object (the rows of its smaller entries) or a WAL entry's. Every
// part's key names, by table.ParseGenerationKey, a number above the
// previous generation's and at most the generation's own: the generation
// number of a generation with parts is the newest WAL position it covers.
type Part struct {
	Key     string              `json:"key"`
	Rows    int64               `json:"rows"`
	Bytes   int64               `json:"bytes"`
	Columns []table.ColumnStats `json:"columns,omitempty"`
	// Keys are set on a generation of upserts: the key columns (stored
	// names) by which its rows replace the table's when it is merged
	// (commit.Table.MergeKeyed). It holds each key once.
	Keys []string `json:"keys,omitempty"`
}

// fragments returns the generation's objects as table fragments (IDs
// unset).
func (g Generation) fragments() []table.Fragment {
	if len(g.Parts) == 0 {
		return []table.Fragment{{Key: g.Key, Rows: g.Rows, Bytes: g.Bytes, Columns: g.Columns}}
	}
	out := make([]table.Fragment, len(g.Parts))
	for i, p := range g.Parts {
		out[i] = table.Fragment{Key: p.Key, Rows: p.Rows, Bytes: p.Bytes, Columns: p.Columns}
	}
	return out
}

// entryParts returns the WAL positions whose entries are parts of g: the
// table references them, so the shard's cleanup leaves them to garbage
// collection.
func (g Generation) entryParts() map[uint64]bool {
	out := map[uint64]bool{}
	for _, p := range g.Parts {
		if shard, pos, ok := table.ParseGenerationKey(p.Key); ok && p.Key == table.WALKey(shard, pos) {
			out[pos] = true
		}
	}
	return out
}
