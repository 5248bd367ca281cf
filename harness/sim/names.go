package sim

import (
	"cmp"
	"slices"
	"time"

	"github.com/stratadb/strata/table/format"
)

// The window of names across shards: a table remembers a name from the
// latest commit that met it (installed or dropped it) for
// format.IdempotencyWindow on the committers' clocks. A merge that installs
// a name again while the table still remembers it stores an acknowledged
// append twice. nameEvents keeps what each version did to names, and
// checkNames replays them in version order once the run is over.

// nameEvent is what one version did to names.
type nameEvent struct {
	version uint64
	undoes  uint64
	time    time.Time // the committer's clock (Transaction.Time)
	named   []format.NamedRows
	direct  *format.AppendKey
}

// noteNames records version m's names (a ghost of a collected version,
// taken away again, is not recorded).
func (w *world) noteNames(m *format.Manifest) {
	txn := m.Transaction
	if len(txn.Named) == 0 && txn.Idempotency == nil && txn.Undoes == 0 {
		return
	}
	w.emu.Lock()
	w.nameEvents = append(w.nameEvents, nameEvent{version: m.Version, undoes: txn.Undoes, time: txn.Time,
		named: slices.Clone(txn.Named), direct: txn.Idempotency})
	w.emu.Unlock()
}

type nameID struct {
	producer string
	seq      uint64
}

type nameMet struct {
	at      time.Time // the latest commit that met it
	version uint64    // the version that installed it
}

// checkNames fails when a version installs a name that a version before
// it met within the window, as the clocks of the versions between had it.
func (w *world) checkNames() error {
	w.emu.Lock()
	events := slices.Clone(w.nameEvents)
	w.emu.Unlock()
	slices.SortStableFunc(events, func(a, b nameEvent) int { return cmp.Compare(a.version, b.version) })
	met := map[nameID]nameMet{}
	var clock time.Time // the newest time any commit so far applied the window at
	for _, ev := range events {
		if ev.undoes > 0 {
			// A commit taken back forgets the names it installed.
			for k, m := range met {
				if m.version == ev.undoes {
					delete(met, k)
				}
			}
		}
		var newest time.Time
		if len(ev.named) > 0 {
			newest = ev.time
		}
		if k := ev.direct; k != nil {
			met[nameID{k.Producer, k.Seq}] = nameMet{at: k.Time, version: ev.version}
			newest = later(newest, k.Time)
		}
		for _, n := range ev.named {
			id, t := nameID{n.Producer, n.Seq}, later(n.Time, ev.time)
			m, known := met[id]
			if !n.Dropped && known && clock.Sub(m.at) <= format.IdempotencyWindow {
				return w.fail("exactly once", "v%d installs %s/%d again: v%d installed it, and the newest window applied since was %v past the latest commit that met it (the window is %v)",
					ev.version, n.Producer, n.Seq, m.version, clock.Sub(m.at), format.IdempotencyWindow)
			}
			if !n.Dropped {
				m.version = ev.version
			}
			m.at = later(m.at, t)
			met[id] = m
			newest = later(newest, t)
		}
		clock = later(clock, newest)
	}
	return nil
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
