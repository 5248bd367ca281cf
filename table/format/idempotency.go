package format

import (
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/cespare/xxhash/v2"

	"github.com/stratadb/strata/internal/plant"
	"github.com/stratadb/strata/table/evolve"
)

// Idempotent appends. A caller that may send an append again after losing
// its answer names it with an Idempotency: a producer (a client instance,
// a worker, or a key of the caller's own) and the append's sequence number
// among that producer's. The first append of a name stores its rows;
// another with the same name stores nothing and answers the first one's
// outcome. Names are remembered in a Producers record — the table's
// manifest for direct appends, a shard's state and WAL entries for appends
// through a shard — for a window of time and count (IdempotencyWindow,
// MaxProducers, RecentSeqs): see docs/format.md, "Idempotent appends".
//
// Invariants: a name is recorded in the same object that makes its rows
// durable (the manifest that adds them, the WAL entry that holds them),
// so a name is known exactly when its rows are stored; and records leave
// only by the window's rules, applied to the recorder's clock at the
// moment of recording, so that replaying a table's transactions rebuilds
// the same records.

// Errors of idempotent appends.
var (
	// ErrKeyReused: an append's name was used before for other rows.
	ErrKeyReused = errors.New("table: idempotency key reused for different rows")
	// ErrSequenceExpired: an append's sequence number is older than the
	// ones its producer's record still holds: whether it was stored cannot
	// be told.
	ErrSequenceExpired = errors.New("table: idempotency sequence number older than the producer's window")
	// ErrBadIdempotency: a producer name out of its bounds.
	ErrBadIdempotency = errors.New("table: invalid idempotency key")
)

// The window of remembered names.
const (
	// IdempotencyWindow: a producer's record is kept this long after its
	// last append.
	IdempotencyWindow = time.Hour
	// MaxProducers: at most this many producers are remembered per record
	// holder (a table's direct appends, one shard); beyond it the least
	// recently active are forgotten first.
	MaxProducers = 1000
	// RecentSeqs: per producer, the outcomes of its highest sequence
	// numbers kept. An append may be sent again while up to this many of
	// the producer's later appends are stored.
	RecentSeqs = 8
	// MaxProducerBytes bounds a producer name.
	MaxProducerBytes = 256
)

// Idempotency names one append among its retries.
type Idempotency struct {
	// Producer: who appends (1 to MaxProducerBytes bytes). A client makes
	// one per instance and numbers its appends; a lone key is a producer
	// with one append (Seq 0).
	Producer string
	Seq      uint64
	// Digest of the rows, to tell a retry from other rows under the same
	// name; 0: computed from the rows (RowsDigest). The server passes the
	// request body's.
	Digest uint64
}

// Check refuses a producer name out of bounds.
func (k Idempotency) Check() error {
	if len(k.Producer) == 0 || len(k.Producer) > MaxProducerBytes {
		return fmt.Errorf("%w: a producer name is 1 to %d bytes, not %d", ErrBadIdempotency, MaxProducerBytes, len(k.Producer))
	}
	return nil
}

// ProducerID is the name a record keeps of a producer: 128 bits of its
// SHA-256, base64url. Records hold no caller-chosen text, and every name
// costs the same bytes.
func ProducerID(producer string) string {
	sum := sha256.Sum256([]byte(producer))
	return base64.RawURLEncoding.EncodeToString(sum[:16])
}

// AppendKey is an idempotent append as a record keeps it.
type AppendKey struct {
	Producer string `json:"producer"` // ProducerID of the producer
	Seq      uint64 `json:"seq"`
	Digest   Digest `json:"digest"`
	// Time: when the append was made (the appender's clock); the window
	// counts from it.
	Time time.Time `json:"time,omitzero"`
	// Legacy: the rows' digest as older builds made it (see Matches);
	// never recorded.
	Legacy Digest `json:"-"`
}

// Key returns k as a record keeps it, made at now, with digest d when k
// names none.
func (k Idempotency) Key(d uint64, now time.Time) AppendKey {
	if k.Digest != 0 {
		d = k.Digest
	}
	return AppendKey{Producer: ProducerID(k.Producer), Seq: k.Seq, Digest: Digest(d), Time: now.UTC()}
}

// Digest is a 64-bit digest, written as 16 hex digits.
type Digest uint64

func (d Digest) MarshalText() ([]byte, error) {
	return fmt.Appendf(nil, "%016x", uint64(d)), nil
}

func (d *Digest) UnmarshalText(b []byte) error {
	v, err := strconv.ParseUint(string(b), 16, 64)
	if err != nil || len(b) != 16 {
		return fmt.Errorf("table: digest %q is not 16 hex digits", b)
	}
	*d = Digest(v)
	return nil
}

// RowsDigest digests rows as a schema change leaves them: of each batch,
// the columns holding a value (a column all null, such as one added since
// the rows were first sent, adds nothing), under their stored names, with
// no metadata and every field nullable, as an Arrow IPC stream (without
// compression). So rows sent again after a column was added, renamed or
// made nullable have the digest they had; a widened column's values are
// other bytes, and so another digest.
func RowsDigest(schema *arrow.Schema, batches []arrow.RecordBatch) (uint64, error) {
	h := xxhash.New()
	for _, rec := range batches {
		var fields []arrow.Field
		var cols []arrow.Array
		for i, col := range rec.Columns() {
			if col.Len() > 0 && col.NullN() == col.Len() {
				continue
			}
			f := schema.Field(i)
			fields = append(fields, arrow.Field{Name: evolve.StoredName(f), Type: f.Type, Nullable: true})
			cols = append(cols, col)
		}
		kept := array.NewRecordBatch(arrow.NewSchema(fields, nil), cols, rec.NumRows())
		w := ipc.NewWriter(h, ipc.WithSchema(kept.Schema()))
		err := w.Write(kept)
		kept.Release()
		if cerr := w.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return 0, err
		}
	}
	return h.Sum64(), nil
}

// LegacyRowsDigest is the digest of rows as builds before RowsDigest made
// it (the batches' IPC stream, schema and all): a name such a build
// recorded is matched by it (AppendKey.Legacy).
func LegacyRowsDigest(schema *arrow.Schema, batches []arrow.RecordBatch) (uint64, error) {
	h := xxhash.New()
	w := ipc.NewWriter(h, ipc.WithSchema(schema))
	for _, rec := range batches {
		if err := w.Write(rec); err != nil {
			return 0, err
		}
	}
	if err := w.Close(); err != nil {
		return 0, err
	}
	return h.Sum64(), nil
}

// Matches tells whether digest d, recorded for a name, is that of k's rows
// (by RowsDigest, or by LegacyRowsDigest for a record of an older build).
func (k AppendKey) Matches(d Digest) bool {
	return d == k.Digest || k.Legacy != 0 && d == k.Legacy
}

// DigestRows is the key k names for batches of schema, made at now: with
// their digest when k names none (and their legacy one, see Matches).
func (k Idempotency) DigestRows(schema *arrow.Schema, batches []arrow.RecordBatch, now time.Time) (AppendKey, error) {
	if k.Digest != 0 {
		return k.Key(0, now), nil
	}
	d, err := RowsDigest(schema, batches)
	if err != nil {
		return AppendKey{}, err
	}
	legacy, err := LegacyRowsDigest(schema, batches)
	if err != nil {
		return AppendKey{}, err
	}
	key := k.Key(d, now)
	key.Legacy = Digest(legacy)
	return key, nil
}

// BodyDigest digests bytes as they are read (the server's request body).
func BodyDigest(r io.Reader) (io.Reader, func() uint64) {
	h := xxhash.New()
	return io.TeeReader(r, h), h.Sum64
}

// Outcome is what the first append of a name did: At is the version that
// holds its rows (direct appends) or the WAL position (through a shard).
type Outcome struct {
	Seq    uint64 `json:"seq"`
	Digest Digest `json:"digest"`
	At     uint64 `json:"at"`
	Rows   int64  `json:"rows"`
}

// ProducerRecord is what is remembered of one producer: the outcomes of
// its RecentSeqs highest sequence numbers stored, and when it last
// appended.
type ProducerRecord struct {
	Producer string    `json:"producer"`
	Recent   []Outcome `json:"recent"` // ascending Seq
	// Older are the sequence numbers stored before Recent's, within
	// OlderSpan below the highest: a merge that meets a copy of such an
	// append from another shard, behind RecentSeqs later ones of its
	// producer, drops it (Installed).
	Older *OlderSeqs `json:"older,omitempty"`
	Time  time.Time  `json:"time"`
}

// OlderSeqs is a set of sequence numbers below Top, within OlderSpan of
// it: bit i of Bits (bit i%8 of byte i/8) stands for Top-1-i. Bits ends
// at its last byte with a bit set.
type OlderSeqs struct {
	Top  uint64 `json:"top"`
	Bits []byte `json:"bits"` // base64 in JSON
}

// OlderSpan is how far below its newest the sequence numbers a producer
// record's Older holds reach: a copy met behind more later appends of its
// producer than this is installed as a new append.
const OlderSpan = 1024

// Holds tells whether o holds seq.
func (o *OlderSeqs) Holds(seq uint64) bool {
	if o == nil || seq >= o.Top || o.Top-seq > OlderSpan {
		return false
	}
	i := o.Top - 1 - seq
	return int(i/8) < len(o.Bits) && o.Bits[i/8]&(1<<(i%8)) != 0
}

// With returns o with seq added, the span moved up to it if above; o
// itself is not changed.
func (o *OlderSeqs) With(seq uint64) *OlderSeqs {
	if o.Holds(seq) {
		return o
	}
	out := &OlderSeqs{Top: seq + 1}
	if o != nil {
		out.Top = max(o.Top, seq+1)
	}
	bits := make([]byte, OlderSpan/8)
	set := func(s uint64) {
		if s < out.Top && out.Top-s <= OlderSpan {
			i := out.Top - 1 - s
			bits[i/8] |= 1 << (i % 8)
		}
	}
	if o != nil {
		for i := uint64(0); i < uint64(len(o.Bits))*8 && i < o.Top; i++ {
			if o.Bits[i/8]&(1<<(i%8)) != 0 {
				set(o.Top - 1 - i)
			}
		}
	}
	set(seq)
	n := len(bits)
	for n > 0 && bits[n-1] == 0 {
		n--
	}
	out.Bits = bits[:n]
	return out
}

// Producers is a record of idempotent appends, ordered by when each
// producer last appended (oldest first).
type Producers []ProducerRecord

// Lookup tells what became of the append k names: its first outcome
// (found), nothing (a new append), or an error: ErrKeyReused for a known
// name with another digest, ErrSequenceExpired for a sequence number below
// every one the producer's record still holds.
func (p Producers) Lookup(k AppendKey) (o Outcome, found bool, err error) {
	i := p.index(k.Producer)
	if i < 0 || plant.On(plant.NamesForgotten) {
		return Outcome{}, false, nil
	}
	rec := p[i].Recent
	for _, o := range rec {
		if o.Seq == k.Seq {
			if !k.Matches(o.Digest) {
				return o, false, fmt.Errorf("%w: sequence %d was stored at %d with digest %016x, this append's is %016x",
					ErrKeyReused, k.Seq, o.At, uint64(o.Digest), uint64(k.Digest))
			}
			return o, true, nil
		}
	}
	if len(rec) >= RecentSeqs && k.Seq < rec[0].Seq {
		return Outcome{}, false, fmt.Errorf("%w: sequence %d is below %d, the oldest of the %d kept", ErrSequenceExpired, k.Seq, rec[0].Seq, len(rec))
	}
	return Outcome{}, false, nil
}

func (p Producers) index(producer string) int {
	return slices.IndexFunc(p, func(r ProducerRecord) bool { return r.Producer == producer })
}

// Record returns p with append k recorded as stored at at with rows rows,
// then the window applied at k's time: records idle past
// IdempotencyWindow, and the least recently active beyond MaxProducers,
// are dropped. p itself is not changed. Recording a name already there
// changes nothing.
func (p Producers) Record(k AppendKey, at uint64, rows int64) Producers {
	out, had := p.keep(k, at, rows)
	if had {
		return p
	}
	return out.expire(k.Time)
}

// keep is Record with no window applied: every record p holds stays; had
// tells that p records k already (out is p then).
func (p Producers) keep(k AppendKey, at uint64, rows int64) (out Producers, had bool) {
	out = slices.Clone(p)
	var rec ProducerRecord
	if i := out.index(k.Producer); i >= 0 {
		rec = out[i]
		out = slices.Delete(out, i, i+1)
		if slices.ContainsFunc(rec.Recent, func(o Outcome) bool { return o.Seq == k.Seq }) {
			return p, true
		}
	}
	rec.Producer = k.Producer
	rec.Recent = append(slices.Clone(rec.Recent), Outcome{Seq: k.Seq, Digest: k.Digest, At: at, Rows: rows})
	slices.SortFunc(rec.Recent, func(a, b Outcome) int { return cmpU64(a.Seq, b.Seq) })
	if n := len(rec.Recent); n > RecentSeqs {
		for _, o := range rec.Recent[:n-RecentSeqs] {
			rec.Older = rec.Older.With(o.Seq)
		}
		rec.Recent = rec.Recent[n-RecentSeqs:]
	}
	if k.Time.After(rec.Time) {
		rec.Time = k.Time
	}
	// Ordered by last activity: a record whose time did not move (a
	// clock behind) keeps its place among the others'.
	at2, _ := slices.BinarySearchFunc(out, rec.Time, func(r ProducerRecord, t time.Time) int { return r.Time.Compare(t) })
	return slices.Insert(out, at2, rec), false
}

// expire drops the records idle for IdempotencyWindow at now, and the
// oldest beyond MaxProducers.
func (p Producers) expire(now time.Time) Producers {
	cut := 0
	for cut < len(p) && now.Sub(p[cut].Time) > IdempotencyWindow {
		cut++
	}
	cut = max(cut, len(p)-MaxProducers)
	if cut == 0 {
		return p
	}
	return slices.Clone(p[cut:])
}

// Forget returns p without the outcomes stored at at: a commit taken back
// (a stalled append whose data garbage collection took, undone) stored
// nothing, and its append must be sent again. p itself is not changed.
func (p Producers) Forget(at uint64) Producers {
	var out Producers
	for _, r := range p {
		kept := slices.DeleteFunc(slices.Clone(r.Recent), func(o Outcome) bool { return o.At == at })
		if len(kept) > 0 {
			r.Recent = kept
			out = append(out, r)
		}
	}
	return out
}

// Expire returns p without the records idle for IdempotencyWindow at now
// (a shard's flush applies the window by its clock).
func (p Producers) Expire(now time.Time) Producers { return p.expire(now) }

func cmpU64(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
