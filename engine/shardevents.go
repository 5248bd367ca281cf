package engine

import (
	"time"

	"github.com/stratadb/strata/walshard"
)

// shardListener is what the process's shard id tells of what it does:
// the DB's listener's events, its background failures the DB's own (told
// as BackgroundError and kept as the DB's last error).
func (db *DB) shardListener(id string) walshard.Listener {
	l, name := db.opts.Listener, db.opts.Name
	return walshard.Listener{
		FlushEnd: func(gen uint64, d time.Duration, err error) {
			l.FlushEnd(FlushInfo{Table: name, Shard: id, Generation: gen, Duration: d, Err: err})
		},
		MergeEnd: func(r walshard.MergeResult, d time.Duration, err error) {
			res := FleetResult{Generations: r.Generations, Rows: r.Rows, Version: r.Version}
			if r.Version != 0 && !r.Done {
				res.Shards, res.Merged = 1, map[string]uint64{id: r.Watermark}
			}
			l.MergeEnd(MergeInfo{Table: name, Result: res, Duration: d, Err: err})
		},
		CommitEnd: func(d time.Duration, err error) {
			l.CommitEnd(CommitInfo{Table: name, Shard: id, Duration: d, Err: err})
		},
		Quarantine: func(q walshard.Quarantined) {
			l.Quarantine(QuarantineInfo{Table: name, Shard: id, Entry: q})
		},
		WriteStall: func(s walshard.StallInfo) {
			l.WriteStall(WriteStallInfo{Table: name, StallInfo: s})
		},
		BackgroundError: func(what string, err error) {
			db.backgroundError("shard "+id+" "+what, err)
		},
	}
}
