package sim

import (
	"fmt"
	"time"

	"github.com/stratadb/strata/compactor"
	"github.com/stratadb/strata/engine"
	"github.com/stratadb/strata/table/format"
)

// The garbage collector.

func (w *world) gcPolicy(a *actor) *compactor.GCPolicy {
	return &compactor.GCPolicy{KeepVersions: 1 + w.intn(3), RetainFor: compactor.MinRetain, SafetyAge: compactor.MinRetain,
		ConsumerRetention: consumerRetention, RetireShardsAfter: compactor.MinRetireShardsAfter, Commit: w.commitOptions(a)}
}

func (w *world) gcOp(a *actor) (string, string) {
	if d := []time.Duration{0, time.Minute, 6 * time.Minute}[w.intn(3)]; d > 0 {
		w.clock.Advance(d)
	}
	// Now and then the fleet sleeps past the retirement age: the quiet
	// shards that hold nothing are retired, and their owners, back, are
	// fenced and open them again (drawn from a stream of its own, so
	// that earlier seeds run as they did).
	if w.pauses.IntN(25) == 0 {
		w.clock.Advance(compactor.MinRetireShardsAfter + time.Hour)
	}
	res, err := w.db(a).GC(w.ctx, engine.GCOptions{Policy: w.gcPolicy(a), Now: w.clock.Now()})
	var gens []string
	for _, k := range res.ObjectsDeleted {
		if shard, gen, ok := format.ParseGenerationKey(k); ok {
			gens = append(gens, fmt.Sprintf("%s/%d", shard, gen))
		}
	}
	repaired := ""
	if len(res.Repaired) > 0 {
		repaired = fmt.Sprintf(", repaired %v", res.Repaired)
	}
	retired := ""
	if len(res.ShardsRetired) > 0 {
		retired = fmt.Sprintf(", shards retired %v", res.ShardsRetired)
	}
	return "gc", fmt.Sprintf("boundary v%d, %d versions and %d objects deleted (generations %v)%s%s: %s", res.Boundary, len(res.VersionsDeleted), len(res.ObjectsDeleted), gens, repaired, retired, short(err))
}
