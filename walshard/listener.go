package walshard

import "time"

// Listener is told of what a shard does, by the goroutine that did it:
// its flushes and merges (the background loops' too), each merge's commit,
// each WAL entry set aside, each write stall, and each failure of
// background work that has no caller to answer (a keep-alive). Nil fields
// are not told. A background failure is never dropped: it reaches
// FlushEnd, MergeEnd or BackgroundError.
type Listener struct {
	// FlushEnd: a flush ended (gen 0: the memtable was empty).
	FlushEnd func(gen uint64, d time.Duration, err error)
	// MergeEnd: a merge of the shard's generations ended.
	MergeEnd func(res MergeResult, d time.Duration, err error)
	// CommitEnd: one of the shard's own merge commits ended, how long it
	// took (catching up with others included) and how.
	CommitEnd func(d time.Duration, err error)
	// Quarantine: a WAL entry was set aside (see Quarantined).
	Quarantine func(Quarantined)
	// WriteStall: writers waited for room (see StallInfo), told once the
	// wait ends.
	WriteStall func(StallInfo)
	// BackgroundError: background work of the shard failed where no caller
	// waits for it (what names it: "keep-alive").
	BackgroundError func(what string, err error)
}

// StallInfo is a write stall: an append waited for the memtable to have
// room (Reason StallMemtable), or a flush for merges to take generations
// (StallGenerations), for Duration; Err is why the wait ended early (a
// closed or fenced handle, a cancelled context), nil when room came.
type StallInfo struct {
	Shard    string
	Reason   string
	Duration time.Duration
	Err      error
}

// Reasons of a write stall.
const (
	StallMemtable    = "memtable full"
	StallGenerations = "generations await merging"
)

// stalled tells the listener of a stall that began at began, when one did.
func (s *Shard) stalled(reason string, began time.Time, err error) {
	if began.IsZero() || s.opts.Listener.WriteStall == nil {
		return
	}
	s.opts.Listener.WriteStall(StallInfo{Shard: s.id, Reason: reason, Duration: time.Since(began), Err: err})
}
