package engine

import (
	"context"
	"log/slog"
	"strings"
	"time"
)

// EventListener is told what a DB did. Every field may be nil; Open fills
// the nil ones from the logging listener (LoggingListener), so that a
// listener set for metrics alone still leaves the log lines.
type EventListener struct {
	FlushEnd        func(FlushInfo)
	MergeEnd        func(MergeInfo)
	CompactionEnd   func(CompactionInfo)
	GCEnd           func(GCInfo)
	AdoptionEnd     func(AdoptionInfo)
	BackgroundError func(BackgroundErrorInfo)
	// The process's own shard: each merge commit, each WAL entry set
	// aside at replay, each write stall.
	CommitEnd  func(CommitInfo)
	Quarantine func(QuarantineInfo)
	WriteStall func(WriteStallInfo)
}

// CommitInfo: a merge commit of the process's shard ended, how long it
// took (catching up with others included) and how.
type CommitInfo struct {
	Table    string
	Shard    string
	Duration time.Duration
	Err      error
}

// QuarantineInfo: replaying the process's shard set a WAL entry aside
// (see walshard.Quarantined): its rows are not in the table.
type QuarantineInfo struct {
	Table string
	Shard string
	Entry Quarantined
}

// WriteStallInfo: writers of the process's shard waited for room — an
// append for the memtable (Reason walshard.StallMemtable), a flush for
// merges to take generations (StallGenerations) — told when the wait
// ended.
type WriteStallInfo struct {
	Table string
	StallInfo
}

// FlushInfo: the process's shard sealed its memtable into a generation.
type FlushInfo struct {
	Table      string
	Shard      string
	Generation uint64 // 0: the memtable was empty
	Duration   time.Duration
	Err        error
}

// MergeInfo: a merge installed flushed generations into the manifest:
// every shard's (Fleet), or the process's own shard's.
type MergeInfo struct {
	Table    string
	Fleet    bool
	Result   FleetResult
	Duration time.Duration
	Err      error
}

// CompactionInfo: a compaction ran, or was not due (Skipped says why).
type CompactionInfo struct {
	Table    string
	Result   CompactResult
	Run      Run // as recorded in the table's history (Started zero: not recorded)
	Skipped  string
	DryRun   bool
	Duration time.Duration
	Err      error
}

// GCInfo: a garbage collection ran.
type GCInfo struct {
	Table    string
	Result   GCResult
	DryRun   bool
	Duration time.Duration
	Err      error
}

// AdoptionInfo: an abandoned shard was adopted (or adopting it failed).
type AdoptionInfo struct {
	Table     string
	Shard     string
	QuietFrom time.Time
	Result    AdoptResult
	Err       error
}

// BackgroundErrorInfo: work the DB ran in the background failed.
type BackgroundErrorInfo struct {
	Table string
	What  string // "flush", "merge", "compaction", …
	Err   error
}

// LoggingListener is the default listener: a line through log for each
// event (errors at Error, adoptions at Warn, the rest at Info).
func LoggingListener(log *slog.Logger) EventListener {
	return EventListener{
		FlushEnd: func(i FlushInfo) {
			if i.Err != nil {
				log.Error("flush failed", "table", i.Table, "shard", i.Shard, "error", i.Err.Error())
			} else if i.Generation != 0 {
				log.Debug("flushed", "table", i.Table, "shard", i.Shard, "generation", i.Generation, "duration_s", i.Duration.Seconds())
			}
		},
		MergeEnd: func(i MergeInfo) {
			switch {
			case i.Err != nil:
				log.Error("merge failed", "table", i.Table, "error", i.Err.Error(), "failed_shards", i.Result.Failed)
			case i.Result.Version != 0:
				log.Info("merged", "table", i.Table, "shards", i.Result.Shards, "generations", i.Result.Generations,
					"rows", i.Result.Rows, "version", i.Result.Version, "peak_memory", i.Result.PeakMemory, "duration_s", i.Duration.Seconds())
			}
		},
		CompactionEnd: func(i CompactionInfo) {
			r := i.Result
			switch {
			case i.Err != nil:
				log.Error("compaction failed", "table", i.Table, "error", i.Err.Error(), "duration_s", i.Duration.Seconds())
			case i.Skipped != "":
				log.Info("compaction skipped", "table", i.Table, "reason", i.Skipped)
			default:
				log.Info("compacted", "table", i.Table, "dry_run", i.DryRun, "plan", strings.TrimSpace(r.Plan.String()), "version", r.Version, "fragments_before", r.FragmentsBefore,
					"fragments_after", r.FragmentsAfter, "rows", r.RowsAfter, "bytes_rewritten", r.BytesRewritten,
					"bins_copied", r.BinsCopied, "bins_sorted", r.BinsSorted, "spills", r.Spills, "peak_memory", r.PeakMemory, "replans", r.Replans, "rebases", r.Rebases, "duration_s", i.Duration.Seconds())
			}
		},
		GCEnd: func(i GCInfo) {
			r := i.Result
			for _, v := range r.Repaired {
				log.Warn("repaired", "table", i.Table, "version", v, "why", "its data was collected before it landed; it was never acknowledged")
			}
			if i.Err != nil {
				log.Error("gc failed", "table", i.Table, "error", i.Err.Error())
				return
			}
			log.Info("gc", "table", i.Table, "dry_run", i.DryRun, "boundary", r.Boundary, "versions_kept", r.VersionsKept,
				"versions_deleted", len(r.VersionsDeleted), "objects_deleted", len(r.ObjectsDeleted), "bytes_freed", r.BytesFreed,
				"shards_retired", len(r.ShardsRetired))
		},
		AdoptionEnd: func(i AdoptionInfo) {
			if i.Err != nil {
				log.Error("adoption failed", "table", i.Table, "shard", i.Shard, "error", i.Err.Error())
				return
			}
			r := i.Result
			log.Warn("adopted an abandoned shard", "table", i.Table, "shard", i.Shard, "quiet_since", i.QuietFrom.UTC().Format(time.RFC3339),
				"epoch", r.Epoch, "rows_replayed", r.Rows, "generations_merged", r.Generations, "version", r.Version, "retired", r.Retired)
		},
		BackgroundError: func(i BackgroundErrorInfo) {
			log.Error(i.What+" failed", "table", i.Table, "error", i.Err.Error())
		},
		CommitEnd: func(CommitInfo) {},
		Quarantine: func(i QuarantineInfo) {
			log.Error("a WAL entry was set aside: its rows are not in the table", "table", i.Table, "shard", i.Shard,
				"position", i.Entry.Position, "copy", i.Entry.Key, "reason", i.Entry.Reason)
		},
		WriteStall: func(i WriteStallInfo) {
			level := slog.LevelDebug
			if i.Duration >= time.Second {
				level = slog.LevelWarn
			}
			log.Log(context.Background(), level, "write stall", "table", i.Table, "shard", i.Shard, "reason", i.Reason, "duration_s", i.Duration.Seconds())
		},
	}
}

// withDefaults fills l's nil fields from the logging listener.
func (l EventListener) withDefaults(log *slog.Logger) EventListener {
	d := LoggingListener(log)
	orDefault(&l.FlushEnd, d.FlushEnd)
	orDefault(&l.MergeEnd, d.MergeEnd)
	orDefault(&l.CompactionEnd, d.CompactionEnd)
	orDefault(&l.GCEnd, d.GCEnd)
	orDefault(&l.AdoptionEnd, d.AdoptionEnd)
	orDefault(&l.BackgroundError, d.BackgroundError)
	orDefault(&l.CommitEnd, d.CommitEnd)
	orDefault(&l.Quarantine, d.Quarantine)
	orDefault(&l.WriteStall, d.WriteStall)
	return l
}

// orDefault sets a listener's field f to d when it is nil.
func orDefault[T any](f *func(T), d func(T)) {
	if *f == nil {
		*f = d
	}
}

// Tee returns a listener that tells a, then b, of every event (a
// metrics listener beside the logging one, say).
func Tee(a, b EventListener) EventListener {
	a, b = a.withDefaults(slog.New(slog.DiscardHandler)), b.withDefaults(slog.New(slog.DiscardHandler))
	return EventListener{
		FlushEnd:        func(i FlushInfo) { a.FlushEnd(i); b.FlushEnd(i) },
		MergeEnd:        func(i MergeInfo) { a.MergeEnd(i); b.MergeEnd(i) },
		CompactionEnd:   func(i CompactionInfo) { a.CompactionEnd(i); b.CompactionEnd(i) },
		GCEnd:           func(i GCInfo) { a.GCEnd(i); b.GCEnd(i) },
		AdoptionEnd:     func(i AdoptionInfo) { a.AdoptionEnd(i); b.AdoptionEnd(i) },
		BackgroundError: func(i BackgroundErrorInfo) { a.BackgroundError(i); b.BackgroundError(i) },
		CommitEnd:       func(i CommitInfo) { a.CommitEnd(i); b.CommitEnd(i) },
		Quarantine:      func(i QuarantineInfo) { a.Quarantine(i); b.Quarantine(i) },
		WriteStall:      func(i WriteStallInfo) { a.WriteStall(i); b.WriteStall(i) },
	}
}
