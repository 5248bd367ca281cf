package expr

import "errors"

// Sentinel errors of the filter language, tested with errors.Is.
var (
	// ErrBadPredicate: a filter that names a missing column or compares a
	// column with a value of another type.
	ErrBadPredicate = errors.New("bad predicate")
	// ErrBadColumns: a list of columns (ParseColumns) that does not parse.
	ErrBadColumns = errors.New("bad column list")
)
