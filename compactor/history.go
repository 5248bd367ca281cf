package compactor

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"time"

	"github.com/stratadb/strata/blob"
)

// Objects the compactor keeps beside the table, under _compactor/.
const (
	historyDir = "_compactor/history/"
	leaseDir   = "_compactor/lease/"
)

// The kinds of run the history records (Run.Kind).
const (
	KindCompaction = "compaction"
	KindGC         = "gc"
	KindAdoption   = "adoption"
	KindExport     = "export"
	KindMerge      = "merge"
)

// Kinds lists the kinds of run, in the order reports show them.
var Kinds = []string{KindCompaction, KindMerge, KindAdoption, KindExport, KindGC}

// Run is one run as recorded in the bucket: a compaction, a garbage
// collection, an adoption sweep, an Iceberg export or a fleet merge
// (Kind). Each record also carries the running totals, so the newest
// record is the status.
type Run struct {
	// Kind: what ran (KindCompaction…); absent in records written before
	// runs had kinds, read as an adoption when Adopted names shards and
	// as a compaction otherwise (KindOf).
	Kind            string    `json:"kind,omitempty"`
	Started         time.Time `json:"started"`
	DurationS       float64   `json:"duration_s"`
	Version         uint64    `json:"version,omitempty"` // 0: nothing committed
	FragmentsBefore int       `json:"fragments_before"`
	FragmentsAfter  int       `json:"fragments_after"`
	Rows            int64     `json:"rows"`
	BytesRewritten  int64     `json:"bytes_rewritten"`
	Error           string    `json:"error,omitempty"`
	// Adopted names the abandoned shards a pass adopted (a run that
	// compacted nothing).
	Adopted []string `json:"adopted,omitempty"`
	// ObjectsDeleted: what a collection deleted; Generations: what a
	// fleet merge installed.
	ObjectsDeleted int `json:"objects_deleted,omitempty"`
	Generations    int `json:"generations,omitempty"`

	// Running totals, carried from the previous record.
	LastCompaction   time.Time `json:"last_compaction,omitzero"` // start of the newest compaction that committed
	TotalCompactions int64     `json:"total_compactions"`        // compactions that committed
	// LastError: the newest failed compaction's error, cleared by the next
	// compaction that commits (Kinds holds every kind's).
	LastError    string    `json:"last_error,omitempty"`
	LastErrorAt  time.Time `json:"last_error_at,omitzero"`
	TotalAdopted int64     `json:"total_adopted"` // abandoned shards adopted
	// Kinds: each kind's newest recorded run, by kind.
	Kinds map[string]KindStatus `json:"kinds,omitempty"`
}

// KindStatus is the newest recorded run of one kind: when it started, how
// long it took, and its error — cleared by the next run of that kind that
// succeeds.
type KindStatus struct {
	LastRun     time.Time `json:"last_run"`
	DurationS   float64   `json:"duration_s"`
	LastSuccess time.Time `json:"last_success,omitzero"`
	LastError   string    `json:"last_error,omitempty"`
	LastErrorAt time.Time `json:"last_error_at,omitzero"`
}

// KindOf is what r records (its Kind, or for records written before runs
// had kinds, an adoption when it names adopted shards, else a compaction).
func KindOf(r Run) string {
	switch {
	case r.Kind != "":
		return r.Kind
	case len(r.Adopted) > 0:
		return KindAdoption
	}
	return KindCompaction
}

// Failing tells whether the newest recorded run of kind failed.
func (s Status) Failing(kind string) bool { return s.Kinds[kind].LastError != "" }

// Status is what the compactor reports of a table.
type Status struct {
	LastCompaction   time.Time `json:"last_compaction,omitzero"`
	TotalCompactions int64     `json:"total_compactions"`
	LastError        string    `json:"last_error,omitempty"`
	LastErrorAt      time.Time `json:"last_error_at,omitzero"`
	TotalAdopted     int64     `json:"total_adopted"`
	// Kinds: each kind's newest recorded run (Run.Kinds).
	Kinds   map[string]KindStatus `json:"kinds,omitempty"`
	History []Run                 `json:"history"` // newest first
	// Skipped: history records that do not decode, passed over (each named
	// with why); they do not stop the status or the next record.
	Skipped []string `json:"skipped_records,omitempty"`
}

func historyKey(t time.Time) string {
	var rnd [4]byte
	_, _ = rand.Read(rnd[:])
	return fmt.Sprintf("%s%020d-%s.json", historyDir, math.MaxInt64-t.UnixNano(), hex.EncodeToString(rnd[:]))
}

// ReadStatus reads the newest records (at most limit; 0 means 20).
func ReadStatus(ctx context.Context, b blob.Bucket, limit int) (Status, error) {
	if limit <= 0 {
		limit = 20
	}
	var st Status
	for o, err := range blob.List(ctx, b, historyDir, 0) {
		if err != nil {
			return st, err
		}
		data, err := b.Get(ctx, o.Key)
		if errors.Is(err, blob.ErrNotFound) {
			continue // pruned meanwhile
		}
		if err != nil {
			return st, err
		}
		var r Run
		if err := json.Unmarshal(data, &r); err != nil {
			st.Skipped = append(st.Skipped, fmt.Sprintf("%s: %v", o.Key, err))
			continue
		}
		if len(st.History) == 0 {
			st.LastCompaction, st.TotalCompactions, st.LastError, st.LastErrorAt = r.LastCompaction, r.TotalCompactions, r.LastError, r.LastErrorAt
			st.TotalAdopted, st.Kinds = r.TotalAdopted, r.Kinds
		}
		st.History = append(st.History, r)
		if len(st.History) == limit {
			break
		}
	}
	return st, nil
}

// Record appends a run to the history, carrying the totals forward, and
// prunes the history to the newest keep records (0 means 100).
func Record(ctx context.Context, b blob.Bucket, r Run, keep int) error {
	_, err := RecordRun(ctx, b, r, keep)
	return err
}

// RecordRun is Record, answering the record as written (its totals).
func RecordRun(ctx context.Context, b blob.Bucket, r Run, keep int) (Run, error) {
	if keep <= 0 {
		keep = 100
	}
	prev, err := ReadStatus(ctx, b, 1)
	if err != nil {
		return r, err
	}
	r = carry(r, prev)
	// The newest record holds the totals: one that started no later than
	// the newest so far (a clock that stands still, or steps back) is
	// still keyed after it.
	at := r.Started
	if len(prev.History) > 0 && !at.After(prev.History[0].Started) {
		at = prev.History[0].Started.Add(time.Nanosecond)
		r.Started = at
	}
	data, _ := json.Marshal(r)
	if err := b.PutIfAbsent(ctx, historyKey(at), data); err != nil {
		return r, err
	}
	return r, prune(ctx, b, keep)
}

// carry gives r the totals of the newest record before it, updated by r.
func carry(r Run, prev Status) Run {
	r.LastCompaction, r.TotalCompactions, r.LastError, r.LastErrorAt = prev.LastCompaction, prev.TotalCompactions, prev.LastError, prev.LastErrorAt
	r.TotalAdopted = prev.TotalAdopted + int64(len(r.Adopted))
	kind := KindOf(r)
	if kind == KindCompaction {
		switch {
		case r.Error != "":
			r.LastError, r.LastErrorAt = r.Error, r.Started
		case r.Version != 0:
			r.LastCompaction, r.LastError, r.LastErrorAt = r.Started, "", time.Time{}
			r.TotalCompactions++
		}
	}
	r.Kinds = make(map[string]KindStatus, len(prev.Kinds)+1)
	maps.Copy(r.Kinds, prev.Kinds)
	ks := r.Kinds[kind]
	ks.LastRun, ks.DurationS = r.Started, r.DurationS
	if r.Error != "" {
		ks.LastError, ks.LastErrorAt = r.Error, r.Started
	} else {
		ks.LastSuccess, ks.LastError, ks.LastErrorAt = r.Started, "", time.Time{}
	}
	r.Kinds[kind] = ks
	return r
}

// prune deletes all but the newest keep records.
func prune(ctx context.Context, b blob.Bucket, keep int) error {
	n := 0
	for o, err := range blob.List(ctx, b, historyDir, 0) {
		if err != nil {
			return err
		}
		if n++; n > keep {
			if err := b.Delete(ctx, o.Key); err != nil && !errors.Is(err, blob.ErrNotFound) {
				return err
			}
		}
	}
	return nil
}
