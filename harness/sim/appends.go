package sim

import (
	"errors"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/stratadb/strata/table/format"
	"github.com/stratadb/strata/walshard"
)

// Replicas: a shard writer that names its appends may lose an answer its
// shard gave (the client of a server's replica does), and sends the append
// again, as often as not through another writer's shard, as a retry that
// reached another replica.

// copiesLocked tells (w.mu held) how many times row id may appear: once;
// twice for a named append sent again past the window its name is
// remembered for; and, for one sent again through other shards when the
// clock is past that window now, once per shard that took it, as the
// table installs a copy merged more than the window after the latest merge
// that met its name (docs/format.md, "Across shards"; checkNames holds the
// merges to that).
func (w *world) copiesLocked(id int64) int {
	n := 1
	if at, ok := w.resentAt[id]; ok && w.clock.Now().Sub(at) >= format.IdempotencyWindow {
		n = max(2, len(w.sentVia[id]))
	}
	if w.twice[id] {
		n++
	}
	return n
}

// errAnswerLost: an append acknowledged whose answer never reached its
// sender, who sends it again.
var errAnswerLost = errors.New("sim: the answer was lost on its way")

// replicaFor is, in a seed with replicas, half the time when a's named
// append is to be sent again, another shard writer whose shard is open and idle, to send it through
// (drawn from the side stream, so that seeds keep their schedules); nil
// otherwise.
func (w *world) replicaFor(a *actor) *actor {
	if a.retry == nil || !w.replicas {
		return nil
	}
	var open []*actor
	for _, b := range w.actors {
		if b != a && b.kind == kShard && b.shard != nil && !b.busy && !b.restart && b.next == nil && b.zombie == nil {
			open = append(open, b)
		}
	}
	if len(open) == 0 || w.sideIntn(2) == 0 {
		return nil
	}
	return open[w.sideIntn(len(open))]
}

// shardAppend appends new rows through s, a's shard — or, a's named
// append sent again, as often as not through another writer's shard (see
// replicaFor) — and records how it ended.
func (w *world) shardAppend(a *actor, s *walshard.Shard) string {
	ids, key := w.nextAppend(a)
	began := w.now()
	var err error
	var ack walshard.Ack
	var sc *arrow.Schema
	via := a
	if a.keyed {
		// One whose outcome was missed is sent again, as often as
		// not, through another shard: a retry that reached another
		// replica of a server, which stores it too until a merge
		// meets both copies.
		if r := w.replicaFor(a); r != nil {
			via, s = r, r.shard
			w.mu.Lock()
			for _, id := range ids {
				if _, ok := w.resentAt[id]; !ok {
					w.resentAt[id] = a.retry.at
				}
			}
			w.mu.Unlock()
		}
		w.mu.Lock()
		for _, id := range ids {
			if w.sentVia[id] == nil {
				w.sentVia[id] = map[string]bool{}
			}
			w.sentVia[id][via.name] = true
		}
		w.mu.Unlock()
		b := batch(ids) // sent again as it was, whatever the schema meanwhile
		ack, err = s.AppendOnce(w.ctx, key, b)
		b.Release()
		if via != a && via.bucket.Crashed() {
			via.restart = true
		}
		if err == nil && w.replicas && w.sideIntn(6) == 0 {
			// The answer is lost on its way to the client (a server's
			// replica acknowledged it): the client sends it again.
			err = errAnswerLost
		}
	} else {
		sc = s.Schema() // with the added columns the shard knows
		b := batchFor(sc, ids)
		err = s.Append(w.ctx, b)
		b.Release()
	}
	fenced := errors.Is(err, walshard.ErrFenced)
	w.settleAppend(a, ids, err, refused(err))
	if err == nil {
		if verr := w.ackExtras(ids, sc, began, a.name); verr != nil {
			return verr.Error()
		}
		w.mu.Lock()
		for _, id := range ids {
			w.shardRows[via.idx][id] = true
		}
		w.mu.Unlock()
	}
	if (fenced && via.next == nil) || errors.Is(err, walshard.ErrSchemaChanged) {
		via.restart = true // a stale schema: the shard opens again under the new one
	}
	through := ""
	if via != a {
		through = " through " + via.name
	}
	return fmt.Sprintf("ids %d..%d%s%s: %s", ids[0], ids[len(ids)-1], keyNote(a, key, ack.Duplicate), through, short(err))
}

// settleAppend records how a's append of ids ended. A named append that
// did not succeed is sent again on a's next turn — a refusal to a fenced
// handle too: its rows are then sent to the new owner, and an earlier
// attempt may have landed — so its rows may appear, at most once, until
// it is acknowledged.
func (w *world) settleAppend(a *actor, ids []int64, err error, fenced bool) {
	if !a.keyed {
		w.settle(ids, err, fenced)
		return
	}
	if err == nil {
		a.retry = nil
		w.settle(ids, nil, false)
		return
	}
	if a.retry == nil {
		// The name's time is when the append began: a stall during
		// it counts against the window.
		a.retry = &pendingAppend{ids: ids, seq: a.seq, at: a.began}
	}
	w.settle(ids, err, false)
}

// refused: a shard's answer that its append stored nothing, for a newer
// owner fenced it out first. An entry that landed and then found the
// newer owner's claim is unknown (ErrAppendUnknown wraps ErrFenced): the
// newer owner may have replayed it.
func refused(err error) bool {
	return errors.Is(err, walshard.ErrFenced) && !errors.Is(err, walshard.ErrAppendUnknown)
}

func (w *world) settle(ids []int64, err error, fenced bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, id := range ids {
		switch {
		case err == nil:
			w.acked[id] = true
			w.rep.RowsAcked++
		case fenced:
			w.forbidden[id] = true
		default:
			w.maybe[id] = true
		}
	}
}
