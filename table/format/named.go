package format

import (
	"errors"
	"fmt"
	"slices"
	"time"
)

// NamedRows are the rows of one idempotent append that a merge installs:
// the append's name, the added fragment (by object key) that holds them,
// and where (Offset, Rows). A shard records the names of its appends
// alone, so the same append sent again to another shard (a retry that
// reached another server) is stored by both: a merge, where the shards
// meet, installs a name once per table. Dropped marks the rows the merger
// found installed already (by another shard's merge, or a direct append)
// and deleted, in the fragment's deletion vector, before the commit.
type NamedRows struct {
	AppendKey
	Fragment string `json:"fragment"`
	Offset   int64  `json:"offset"`
	Rows     int64  `json:"rows"`
	Dropped  bool   `json:"dropped,omitempty"`
}

// Installed tells whether p records that the append k names was stored:
// a name kept with the same digest, or a sequence number below those
// kept that the producer's Older ranges hold (a copy another shard
// stored, met behind later appends of its producer). A name p cannot
// tell of (another digest under the name, a number it holds no trace
// of) is not: its rows were acknowledged as new, and are installed.
func (p Producers) Installed(k AppendKey) bool {
	_, found, err := p.Lookup(k)
	if errors.Is(err, ErrSequenceExpired) {
		i := p.index(k.Producer)
		return i >= 0 && p[i].Older.Holds(k.Seq)
	}
	return found && err == nil
}

// DropNamed marks, in order, the named rows whose name p (the table's
// record) or an earlier one of named records: those a merge must not
// install again. Within named no record expires: whether a copy is
// dropped does not hang on the order of other producers' appends, whose
// times may be far apart (the window is applied once the merge has
// recorded them all, RecordNamed).
func (p Producers) DropNamed(named []NamedRows) []NamedRows {
	out := make([]NamedRows, len(named))
	for i, n := range named {
		n.Dropped = p.Installed(n.AppendKey)
		if !n.Dropped {
			p, _ = p.keep(n.AppendKey, 0, n.Rows)
		}
		out[i] = n
	}
	return out
}

// ErrNamedMoved: a merge planned to drop or keep a named append's rows,
// and the version it is applied to tells otherwise (another merge, or a
// direct append, installed the name meanwhile; or a take-back forgot it).
// The merge plans again.
var ErrNamedMoved = fmt.Errorf("table: a named append's install changed since the merge was planned")

// RecordNamed returns p with the named rows a merge keeps recorded at
// version at, checking that each is dropped exactly when p (or an earlier
// one of named) records its name, as DropNamed decided. Each name, kept or
// dropped, counts as met at when (the merge's clock; its own time when
// later): a copy merged in another shard within the window of the latest
// merge that met its name is dropped, however old the append. Then the
// window is applied at the newest of those times. p itself is not changed.
func (p Producers) RecordNamed(named []NamedRows, at uint64, when time.Time) (Producers, error) {
	if len(named) == 0 {
		return p, nil
	}
	newest := when
	for _, n := range named {
		if p.Installed(n.AppendKey) != n.Dropped {
			return nil, fmt.Errorf("%w: producer %s sequence %d (dropped: %v)", ErrNamedMoved, n.Producer, n.Seq, n.Dropped)
		}
		k := n.AppendKey
		if k.Time.Before(when) {
			k.Time = when
		}
		if n.Dropped {
			p = p.touch(k.Producer, k.Time)
		} else {
			p, _ = p.keep(k, at, n.Rows)
		}
		if k.Time.After(newest) {
			newest = k.Time
		}
	}
	return p.expire(newest), nil
}

// touch returns p with producer's record active at t, if later than it
// was, and moved to its place among the others (p is not changed).
func (p Producers) touch(producer string, t time.Time) Producers {
	i := p.index(producer)
	if i < 0 || !t.After(p[i].Time) {
		return p
	}
	rec := p[i]
	rec.Time = t
	out := slices.Delete(slices.Clone(p), i, i+1)
	to, _ := slices.BinarySearchFunc(out, t, func(r ProducerRecord, t time.Time) int { return r.Time.Compare(t) })
	return slices.Insert(out, to, rec)
}

// DroppedRows gives, by fragment (object key), the row offsets of the
// named rows marked dropped, ascending: what the deletion vector that
// drops them holds.
func DroppedRows(named []NamedRows) map[string][]uint32 {
	out := map[string][]uint32{}
	for _, n := range named {
		for r := n.Offset; n.Dropped && r < n.Offset+n.Rows; r++ {
			out[n.Fragment] = append(out[n.Fragment], uint32(r))
		}
	}
	for k, rows := range out {
		slices.Sort(rows)
		out[k] = slices.Compact(rows)
	}
	return out
}
