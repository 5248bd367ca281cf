package format

import (
	"errors"
	"fmt"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
)

// Sentinel errors, tested with errors.Is.
var (
	// ErrNotFound: no table at the URL (no manifest under _versions/).
	ErrNotFound = errors.New("no table here")
	// ErrExists: creating a table where one exists.
	ErrExists = errors.New("table already exists")
	// ErrVersionNotFound: the version was never committed or has been
	// garbage-collected.
	ErrVersionNotFound = errors.New("version not found")
	// ErrTagExists: creating a tag that exists.
	ErrTagExists = errors.New("tag already exists")
	// ErrTagNotFound: no tag of that name.
	ErrTagNotFound = errors.New("tag not found")
	// ErrCorrupt: an object that cannot be decoded (truncated, damaged,
	// or not what its name says). Always wrapped in a *CorruptError.
	ErrCorrupt = errors.New("corrupt object")
	// ErrUnsupportedFormat: a manifest of a newer major format version.
	ErrUnsupportedFormat = errors.New("unsupported format version")
	// ErrBadName: a tag or table name (or other) outside what the format
	// allows. A table's comes in a *NameError.
	ErrBadName = errors.New("bad name")
	// ErrPlacement: a table created where it would share a folder with
	// another table's own objects. Always in a *PlacementError.
	ErrPlacement = errors.New("a table cannot go there")
)

// CorruptError says which object is damaged and how.
type CorruptError struct {
	Key    string // the object's key in the bucket
	Reason string
	Err    error // the decoder's error, if any
}

func (e *CorruptError) Error() string {
	msg := fmt.Sprintf("table: corrupt object %q: %s", e.Key, e.Reason)
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

// Is makes errors.Is(err, ErrCorrupt) true.
func (e *CorruptError) Is(target error) bool { return target == ErrCorrupt }

func (e *CorruptError) Unwrap() error { return e.Err }

func Corrupt(key, reason string, err error) error {
	return &CorruptError{Key: key, Reason: reason, Err: err}
}

// NoColumn says that the schema has no column name, and names those it
// has (the first 20), so that a misspelt name is seen at once.
func NoColumn(name string, s *arrow.Schema) string {
	names := make([]string, 0, min(s.NumFields(), 20))
	for i, f := range s.Fields() {
		if i == 20 {
			names = append(names, fmt.Sprintf("and %d more", s.NumFields()-20))
			break
		}
		names = append(names, f.Name)
	}
	return fmt.Sprintf("no column %q (the table's columns: %s)", name, strings.Join(names, ", "))
}

// ChangesCollectedError: a version the changes need was removed by garbage
// collection; Oldest is the oldest version still readable.
type ChangesCollectedError struct {
	Version, Oldest uint64
}

func (e *ChangesCollectedError) Error() string {
	return fmt.Sprintf("table: version %d was collected by garbage collection; the oldest readable version is %d", e.Version, e.Oldest)
}

// Is makes errors.Is(err, ErrVersionNotFound) true.
func (e *ChangesCollectedError) Is(target error) bool { return target == ErrVersionNotFound }
