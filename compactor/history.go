package compactor

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/stratadb/strata/blob"
)

// Objects the compactor keeps beside the table, under _compactor/.
const (
	historyDir = "_compactor/history/"
	leaseDir   = "_compactor/lease/"
)

// Run is one compaction run as recorded in the bucket. Each record also
// carries the running totals, so the newest record is the status.
type Run struct {
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

	// Running totals, carried from the previous record.
	LastCompaction   time.Time `json:"last_compaction,omitzero"` // start of the newest run that committed
	TotalCompactions int64     `json:"total_compactions"`        // runs that committed
	LastError        string    `json:"last_error,omitempty"`     // the newest failed run's error
	LastErrorAt      time.Time `json:"last_error_at,omitzero"`
	TotalAdopted     int64     `json:"total_adopted"` // abandoned shards adopted
}

// Status is what the compactor reports of a table.
type Status struct {
	LastCompaction   time.Time `json:"last_compaction,omitzero"`
	TotalCompactions int64     `json:"total_compactions"`
	LastError        string    `json:"last_error,omitempty"`
	LastErrorAt      time.Time `json:"last_error_at,omitzero"`
	TotalAdopted     int64     `json:"total_adopted"`
	History          []Run     `json:"history"` // newest first
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
			st.TotalAdopted = r.TotalAdopted
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
	if keep <= 0 {
		keep = 100
	}
	prev, err := ReadStatus(ctx, b, 1)
	if err != nil {
		return err
	}
	r.LastCompaction, r.TotalCompactions, r.LastError, r.LastErrorAt = prev.LastCompaction, prev.TotalCompactions, prev.LastError, prev.LastErrorAt
	r.TotalAdopted = prev.TotalAdopted + int64(len(r.Adopted))
	switch {
	case r.Error != "":
		r.LastError, r.LastErrorAt = r.Error, r.Started
	case r.Version != 0:
		r.LastCompaction = r.Started
		r.TotalCompactions++
	}
	data, _ := json.Marshal(r)
	if err := b.PutIfAbsent(ctx, historyKey(r.Started), data); err != nil {
		return err
	}
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
