package wal

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/table/format"
	"github.com/stratadb/strata/table/fragment"
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
	// Moved is set, with Seq 0, on the stand-in under state/ that a
	// build with flush objects leaves there (see moveOldStates).
	Moved uint64 `json:"moved,omitempty"`
	// Producers records the idempotent appends of the shard (At: each
	// one's WAL position) within the window of format.Idempotency: those
	// of entries at or below WALFlushed at least; replay adds the others'
	// from their entries.
	Producers format.Producers `json:"producers,omitempty"`
	// Table is the table's id (format.Manifest.TableID) as the writer
	// opened it: a table dropped and created again under the same name
	// has another, and its fleet merges pass over (and delete) a state
	// of the one before. Empty in states of older builds.
	Table string `json:"table,omitempty"`
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
	// Seq is the state that first recorded the generation: the flush
	// object that holds its rows (an older build's: it names the
	// generation's announcement, format.PendingKey).
	Seq uint64 `json:"seq,omitempty"`
	// Columns are the generation's statistics, carried into the table
	// when the generation is merged.
	Columns []format.ColumnStats `json:"columns,omitempty"`
	// Keys are set on a generation of upserts: the key columns (stored
	// names) by which its rows replace the table's when it is merged
	// (commit.Table.MergeKeyed). It holds each key once, unless Repeats.
	Keys []string `json:"keys,omitempty"`
	// Named are the idempotent appends whose rows the generation holds,
	// each with its object (the flush object, or a part) and its rows
	// there: a merge installs a name once per table (format.NamedRows).
	// On a generation of upserts, each named upsert's rows that no later
	// upsert of the generation replaced (commit.Table.MergeKeyed).
	Named []format.NamedRows `json:"named,omitempty"`
	// Repeats is set on a generation of upserts whose object holds a key
	// more than once: a named upsert leaves the rows of its key before it
	// (its merge may drop it, as a copy another shard stored, and then
	// they stand). Its rows are each key's last that is not dropped: a
	// merge copies those alone (copyKeyed), a fresh read leaves the
	// others out.
	Repeats bool `json:"repeats,omitempty"`
}

// StateFooterKey names the state in a flush object's Parquet footer.
const StateFooterKey = "strata.shard.state"

// ReadState reads the newest state (Seq 0 when the shard is new): the
// newest flush object's, or, for a shard no build with flush objects has
// written yet, the newest state object under state/.
func ReadState(ctx context.Context, b blob.Bucket, l Layout) (*State, error) {
	st, _, err := readStateWhere(ctx, b, l)
	return st, err
}

// readStateWhere is readState, and tells whether the state is a flush
// object's (not an older build's).
func readStateWhere(ctx context.Context, b blob.Bucket, l Layout) (_ *State, flushed bool, err error) {
	key, seq, found, err := newestFlush(ctx, b, l)
	if err != nil {
		return nil, false, err
	}
	if found {
		st, _, err := ReadFlush(ctx, b, key, seq)
		return st, true, err
	}
	st, err := readOldState(ctx, b, l)
	return st, false, err
}

// ErrStateGone: the newest flush object a listing showed, or a number a
// create found taken, is not there any more (merged and deleted since
// the table's count was read, or garbage collection retired the shard).
var ErrStateGone = errors.New("walshard: the shard's newest state is gone")

// OwnerState finds the state an owner opening the shard goes on from.
// mark is the newest state the table counts as merged, floor a number a
// create found taken (0: none). Fleet merges delete flush objects at or
// below a committed mark, all but each shard's newest, so the numbers at
// or below the table's count may have holes and a listing that lags may
// show an older object than the newest: the state read, by name, is the
// one at the highest of the listing's newest, mark and floor, or the one
// after it when that one is gone. A create after it succeeds on the
// newest state alone, unless the number was a hole, which the table's
// count then covers (takeOver reads it again to tell). With nothing at
// or above mark, the shard has no flush object (new, retired, or an
// older build's): the newest state under state/ is read (moved false).
func OwnerState(ctx context.Context, b blob.Bucket, l Layout, mark, floor uint64) (_ *State, moved bool, err error) {
	_, listed, _, err := newestFlush(ctx, b, l)
	if err != nil {
		return nil, false, err
	}
	from := max(listed, mark, floor)
	if from > 0 {
		for _, n := range []uint64{from, from + 1} {
			st, _, err := ReadFlush(ctx, b, l.FlushKey(n), n)
			if err == nil {
				return st, true, nil
			}
			if !errors.Is(err, blob.ErrNotFound) {
				return nil, false, err
			}
		}
		if from > mark {
			return nil, false, fmt.Errorf("%w: %s", ErrStateGone, l.FlushKey(from))
		}
	}
	st, err := readOldState(ctx, b, l)
	return st, false, err
}

// newestFlush lists the key and sequence number of the shard's newest
// flush object (one LIST of one key).
func newestFlush(ctx context.Context, b blob.Bucket, l Layout) (key string, seq uint64, found bool, err error) {
	page, err := b.ListPage(ctx, l.Flushes(), "", 1)
	if err != nil || len(page.Objects) == 0 {
		return "", 0, false, err
	}
	key = page.Objects[0].Key
	seq, ok := ParseLast(l.Flushes(), key)
	if !ok {
		return "", 0, false, fmt.Errorf("walshard: unexpected object %q among flush objects", key)
	}
	return key, seq, true, nil
}

// ReadFlush reads the flush object key, of state seq: its state, and the
// object itself (the rows of the generation it carries).
func ReadFlush(ctx context.Context, b blob.Bucket, key string, seq uint64) (*State, []byte, error) {
	data, err := b.Get(ctx, key)
	if err != nil {
		return nil, nil, err
	}
	st, err := decodeFlush(key, seq, data)
	return st, data, err
}

// decodeFlush reads the state in the footer of flush object key (of state
// seq), and gives the generation the object carries its size, which the
// footer cannot hold.
func decodeFlush(key string, seq uint64, data []byte) (*State, error) {
	v, ok, _, err := fragment.FooterValue(data, StateFooterKey)
	return FlushState(key, seq, int64(len(data)), v, ok, err)
}

// FlushState is the state a flush object's footer holds (v, when ok; err
// when the footer did not decode), the object being of size bytes: a
// damaged footer, or a state of another sequence number, is corrupt.
func FlushState(key string, seq uint64, size int64, v string, ok bool, err error) (*State, error) {
	if err == nil && !ok {
		err = errors.New("no state in its footer")
	}
	if err != nil {
		return nil, fmt.Errorf("walshard: flush object %q is corrupt: %w", key, err)
	}
	var s State
	if err := json.Unmarshal([]byte(v), &s); err != nil || s.Seq != seq {
		return nil, fmt.Errorf("walshard: flush object %q is corrupt: state %d: %v", key, s.Seq, err)
	}
	s.sized(key, size)
	return &s, nil
}

// sized records size as the size of the object key in the generations
// that hold it.
func (s *State) sized(key string, size int64) {
	for i := range s.Generations {
		g := &s.Generations[i]
		if g.Key == key {
			g.Bytes = size
		}
		for j := range g.Parts {
			if g.Parts[j].Key == key && g.Parts[j].Bytes != size {
				g.Bytes += size - g.Parts[j].Bytes
				g.Parts[j].Bytes = size
			}
		}
	}
}

// readOldState reads the newest state object under state/, which builds
// before flush objects wrote: JSON, or the stand-in a build that moved
// the shard to flush objects left there (State.Moved).
func readOldState(ctx context.Context, b blob.Bucket, l Layout) (*State, error) {
	page, err := b.ListPage(ctx, l.States(), "", 1)
	if err != nil {
		return nil, err
	}
	if len(page.Objects) == 0 {
		return &State{NextGen: 1}, nil
	}
	key := page.Objects[0].Key
	seq, ok := ParseLast(l.States(), key)
	if !ok {
		return nil, fmt.Errorf("walshard: unexpected object %q among shard states", key)
	}
	data, err := b.Get(ctx, key)
	if err != nil {
		return nil, err
	}
	var s State
	if err := json.Unmarshal(data, &s); err != nil || s.Seq != seq && (s.Seq != 0 || s.Moved != seq) {
		return nil, fmt.Errorf("walshard: shard state %q is corrupt: %v", key, err)
	}
	s.Seq, s.Moved = seq, 0
	return &s, nil
}

// WriteState creates the flush object of state s, at s.Seq, holding the
// rows of batches (none: a state alone). The generation s lists with the
// object's key gets the rows' count and statistics before the state is
// sealed in the footer, and the object's size after. It returns
// errStateTaken when another writer holds that sequence number, and an
// *unencodableError when the rows cannot be written as Parquet.
func WriteState(ctx context.Context, b blob.Bucket, l Layout, schema *arrow.Schema, s *State, batches []arrow.RecordBatch) error {
	key := l.FlushKey(s.Seq)
	if l.Table != "" {
		s.Table = l.Table
	}
	var sealErr error
	data, _, err := fragment.EncodeWith(schema, batches, func(_ []byte, f format.Fragment) (string, string) {
		s.carry(key, f)
		js, err := json.Marshal(s)
		sealErr = err
		return StateFooterKey, string(js)
	})
	if err == nil {
		err = sealErr
	}
	if err != nil {
		return &UnencodableError{err: err}
	}
	s.sized(key, int64(len(data)))
	return createState(ctx, b, key, data, func(got []byte) bool {
		other, err := decodeFlush(key, s.Seq, got)
		return err == nil && other.ID == s.ID
	})
}

// createState creates a state object, key, put-if-absent. It returns
// errStateTaken when another writer holds it. A failure that may hide a
// landed create (a lost response, a 412 after an SDK retry) is resolved
// by reading the object back: mine tells whether it is the one written.
func createState(ctx context.Context, b blob.Bucket, key string, data []byte, mine func(got []byte) bool) error {
	err := b.PutIfAbsent(ctx, key, data)
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
		return &UnsureError{key: key, err: errors.Join(err, rerr)}
	}
	if mine(got) {
		return nil
	}
	return ErrStateTaken
}

// carry sets the rows and statistics of the generation (or part) that
// flush object key holds, from the fragment its rows encode to; its size
// is left out (the footer cannot know it: readers take the object's).
func (s *State) carry(key string, f format.Fragment) {
	for i := range s.Generations {
		g := &s.Generations[i]
		if g.Key == key {
			g.Rows, g.Bytes, g.Columns = f.Rows, 0, f.Columns
		}
		for j := range g.Parts {
			if p := &g.Parts[j]; p.Key == key {
				g.Rows += f.Rows - p.Rows
				g.Bytes -= p.Bytes
				p.Rows, p.Bytes, p.Columns = f.Rows, 0, f.Columns
			}
		}
	}
}

// MoveOldStates writes, under state/, a stand-in for state s (its
// sequence number taken, State.Moved set and Seq 0): a build that reads
// states there finds it corrupt and refuses the shard, and an owner of
// such a build is fenced by it, as by any state at its next number. A
// shard's first state in a flush object is written after it.
func MoveOldStates(ctx context.Context, b blob.Bucket, l Layout, s *State) error {
	stand := *s
	stand.Seq, stand.Moved = 0, s.Seq
	data, err := json.Marshal(&stand)
	if err != nil {
		return err
	}
	return createState(ctx, b, l.StateKey(s.Seq), data, func(got []byte) bool {
		var other State
		return json.Unmarshal(got, &other) == nil && other.ID == s.ID
	})
}

// UnencodableError: rows a flush took cannot be written as Parquet.
type UnencodableError struct{ err error }

func (e *UnencodableError) Error() string { return "walshard: encoding a flush: " + e.err.Error() }
func (e *UnencodableError) Unwrap() error { return e.err }

// UnsureError: a state's create may have landed, and reading it back
// failed too.
type UnsureError struct {
	key string
	err error
}

func (e *UnsureError) Error() string {
	return fmt.Sprintf("walshard: whether state %s was created is unknown: %v", e.key, e.err)
}
func (e *UnsureError) Unwrap() error { return e.err }

// InFlush tells whether key is a flush object's: its rows are copied into
// the table when merged, never added as they are.
func InFlush(key string) bool { return strings.HasPrefix(key, format.FleetFlushDir) }

// Pending returns the generations above the table's watermark.
func (s *State) Pending(watermark uint64) []Generation {
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
// part's key names, by format.ParseGenerationKey, a number above the
// previous generation's and at most the generation's own: the generation
// number of a generation with parts is the newest WAL position it covers.
type Part struct {
	Key     string               `json:"key"`
	Rows    int64                `json:"rows"`
	Bytes   int64                `json:"bytes"`
	Columns []format.ColumnStats `json:"columns,omitempty"`
	// Keys are set on a generation of upserts: the key columns (stored
	// names) by which its rows replace the table's when it is merged
	// (commit.Table.MergeKeyed). It holds each key once.
	Keys []string `json:"keys,omitempty"`
}

// Fragments returns the generation's objects as table fragments (IDs
// unset).
func (g Generation) Fragments() []format.Fragment {
	if len(g.Parts) == 0 {
		return []format.Fragment{{Key: g.Key, Rows: g.Rows, Bytes: g.Bytes, Columns: g.Columns}}
	}
	out := make([]format.Fragment, len(g.Parts))
	for i, p := range g.Parts {
		out[i] = format.Fragment{Key: p.Key, Rows: p.Rows, Bytes: p.Bytes, Columns: p.Columns}
	}
	return out
}

// WALTo returns the newest WAL position gens cover.
func WALTo(gens []Generation) uint64 {
	var to uint64
	for _, g := range gens {
		to = max(to, g.WALTo)
	}
	return to
}

// EntryParts returns the WAL positions whose entries are parts of g: the
// table references them, so the shard's cleanup leaves them to garbage
// collection.
func (g Generation) EntryParts() map[uint64]bool {
	out := map[uint64]bool{}
	for _, p := range g.Parts {
		if shard, pos, ok := format.ParseGenerationKey(p.Key); ok && p.Key == format.WALKey(shard, pos) {
			out[pos] = true
		}
	}
	return out
}
