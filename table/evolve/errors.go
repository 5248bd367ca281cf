package evolve

import (
	"errors"
	"fmt"
)

// Sentinel errors of schemas, tested with errors.Is.
var (
	// ErrSchemaMismatch: data whose schema is not the table's.
	ErrSchemaMismatch = errors.New("schema does not match the table's")
)

// SchemaError says how a batch's schema differs from the table's.
type SchemaError struct {
	Want, Got string // the schemas, printed
}

func (e *SchemaError) Error() string {
	return fmt.Sprintf("table: schema does not match the table's\n  table: %s\n  batch: %s", e.Want, e.Got)
}

// Is makes errors.Is(err, ErrSchemaMismatch) true.
func (e *SchemaError) Is(target error) bool { return target == ErrSchemaMismatch }
