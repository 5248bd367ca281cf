package commit

import (
	"errors"
	"fmt"

	"github.com/stratadb/strata/table/format"
)

var (
	// ErrConflict: a concurrent commit makes ours impossible as planned.
	// Always wrapped in a *ConflictError.
	ErrConflict = errors.New("commit conflict")
	// ErrBudget: the loop ran out of attempts or time. Always wrapped in
	// a *BudgetError.
	ErrBudget = errors.New("commit retry budget exhausted")
	// ErrOutcomeUnknown: whether the commit took effect cannot be told —
	// its create got no answer and the store did not answer the reads that
	// would tell either (the error also wraps the store's), or a stall as
	// long as garbage collection's retention hid it (its version, or the
	// versions after it, were collected before the outcome was read). The
	// caller must treat the write as possibly done (a retry may commit it
	// twice), and must not delete its data objects: garbage collection
	// removes them if nothing references them.
	ErrOutcomeUnknown = errors.New("commit outcome unknown")
)

// ConflictError names our transaction and the one it conflicts with.
type ConflictError struct {
	Ours      format.Transaction
	Theirs    format.Transaction // zero when the conflict is with a state, not a commit
	Version   uint64             // the version theirs made, or the version ours read
	Retryable bool               // re-planning against the newer version may succeed
	// LostData: garbage collection deleted data objects of ours during a
	// stall; they must be written again before a retry.
	LostData bool
	Reason   string
}

func (e *ConflictError) Error() string {
	msg := fmt.Sprintf("commit: %s %s (read v%d) conflicts", e.Ours.Kind, e.Ours.CommitID, e.Ours.ReadVersion)
	if e.Theirs.CommitID != "" {
		msg += fmt.Sprintf(" with %s %s (v%d)", e.Theirs.Kind, e.Theirs.CommitID, e.Version)
	}
	if e.Reason != "" {
		msg += ": " + e.Reason
	}
	if e.Retryable {
		msg += " (re-plan and retry)"
	}
	return msg
}

// Is makes errors.Is(err, ErrConflict) true.
func (e *ConflictError) Is(target error) bool { return target == ErrConflict }

// BudgetError says how far the loop got.
type BudgetError struct {
	CommitID string
	Attempts int
	Last     error
}

func (e *BudgetError) Error() string {
	if e.CommitID == "" {
		return fmt.Sprintf("commit: gave up after %d attempts: %v", e.Attempts, e.Last)
	}
	return fmt.Sprintf("commit %s: gave up after %d attempts: %v", e.CommitID, e.Attempts, e.Last)
}

// Is makes errors.Is(err, ErrBudget) true.
func (e *BudgetError) Is(target error) bool { return target == ErrBudget }

func (e *BudgetError) Unwrap() error { return e.Last }

// IsRetryableConflict reports whether err is a conflict that re-planning
// may resolve.
func IsRetryableConflict(err error) bool {
	var ce *ConflictError
	return errors.As(err, &ce) && ce.Retryable
}
