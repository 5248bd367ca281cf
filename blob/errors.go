package blob

import (
	"errors"
	"fmt"
)

// Error kinds. Every error a Bucket returns matches exactly one of them
// with errors.Is, or is a context error.
var (
	// ErrNotFound: the object does not exist.
	ErrNotFound = errors.New("object not found")
	// ErrExists: a conditional create lost because the object exists.
	ErrExists = errors.New("object already exists")
	// ErrRetryable: a transient failure (throttling, a server error, a
	// timeout, S3's 409 ConditionalRequestConflict); the same request may
	// succeed later. For a write, the object may or may not have landed.
	ErrRetryable = errors.New("transient object store error")
	// ErrPermanent: a failure that retrying will not fix (bad credentials,
	// a missing bucket, an invalid key).
	ErrPermanent = errors.New("object store error")
	// ErrNoConditionalWrites: the store accepted a conditional create of an
	// object that already existed. Strata cannot run on such a store.
	ErrNoConditionalWrites = errors.New("store does not honour conditional creates")
)

// Error is the error every Bucket method returns: the operation, the key
// (or prefix, for List), the kind, and the underlying cause.
type Error struct {
	Op   string // "get", "put", "put-if-absent", "delete", "list", "attributes", "range-get", "open"
	Key  string
	Kind error // one of the kinds above
	Err  error // the cause, possibly nil
}

func (e *Error) Error() string {
	msg := fmt.Sprintf("blob: %s %q: %v", e.Op, e.Key, e.Kind)
	if e.Err != nil && e.Err.Error() != e.Kind.Error() {
		msg += ": " + e.Err.Error()
	}
	return msg
}

// Is reports whether target is the error's kind.
func (e *Error) Is(target error) bool { return target == e.Kind }

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

func newError(op, key string, kind, cause error) error {
	return &Error{Op: op, Key: key, Kind: kind, Err: cause}
}

// IsRetryable reports whether err is a transient object-store failure.
func IsRetryable(err error) bool { return errors.Is(err, ErrRetryable) }
