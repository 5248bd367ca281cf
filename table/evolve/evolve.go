package evolve

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// Schema evolution. A table's columns change by metadata alone (Alter):
// no fragment is rewritten. What makes that work is the stored name: the
// name a column's values carry in fragments, WAL entries and statistics.
// It is the column's name until the column is renamed, and never changes
// after; a renamed column records it in its field's metadata
// (StoredNameKey). Readers find a column in a fragment by its stored name:
//
//   - a fragment written before a column was added lacks it: the column
//     reads as nulls (an added column is nullable);
//   - a renamed column is found under the name it had when the fragment
//     was written, which is its stored name;
//   - a dropped column is no longer read; its stored name is retired
//     (RetiredKey) and never given to a column added later, so that an
//     added column never finds a dropped one's values;
//   - a widened column (a wider integer, float64 for float32, nullable
//     for non-null) is converted as it is read.
//
// Invariants: stored names are unique within a schema and never reused
// (not by a live column, not by a retired one); every schema change
// increments the schema id (SchemaIDKey), which a fragment records
// (Fragment.SchemaID) so that one written under the current schema is
// known to lie out exactly as it does. A writer holding an older schema
// of the table writes its stored names, which readers of the newer one
// resolve as above.
const (
	// StoredNameKey is a field's metadata key for its stored name, when it
	// differs from the field's name.
	StoredNameKey = "strata.stored_name"
	// SchemaIDKey is the schema's metadata key for its id: the number of
	// schema changes since the table (or its last overwrite) was created.
	SchemaIDKey = "strata.schema_id"
	// RetiredKey is the schema's metadata key for the stored names of
	// dropped columns, as a JSON array.
	RetiredKey = "strata.retired"
)

// ErrBadSchemaChange: an Alter that the table cannot take. Always wrapped
// in an error that names the column and the reason.
var ErrBadSchemaChange = errors.New("table: schema change refused")

// StoredName returns the name field f's values carry in fragments.
func StoredName(f arrow.Field) string {
	if v, ok := f.Metadata.GetValue(StoredNameKey); ok && v != "" {
		return v
	}
	return f.Name
}

// SchemaID returns the schema's id (0 for a schema never changed).
func SchemaID(s *arrow.Schema) uint64 {
	if s == nil {
		return 0
	}
	md := s.Metadata()
	if v, ok := md.GetValue(SchemaIDKey); ok {
		n, err := strconv.ParseUint(v, 10, 64)
		if err == nil {
			return n
		}
	}
	return 0
}

// RetiredNames returns the stored names of the columns dropped from s.
func RetiredNames(s *arrow.Schema) []string {
	md := s.Metadata()
	v, ok := md.GetValue(RetiredKey)
	if !ok {
		return nil
	}
	var out []string
	if json.Unmarshal([]byte(v), &out) != nil {
		return nil
	}
	return out
}

// Evolved reports whether s has ever been changed by Alter: its fragments
// may then lie out otherwise than it does.
func Evolved(s *arrow.Schema) bool {
	if s == nil {
		return false
	}
	md := s.Metadata()
	return md.FindKey(SchemaIDKey) >= 0
}

// StoredSchema returns s as fragments store it: each field under its
// stored name (without the StoredNameKey metadata), the schema's metadata
// kept. A schema never renamed is returned as it is.
func StoredSchema(s *arrow.Schema) *arrow.Schema {
	renamed := false
	for _, f := range s.Fields() {
		if f.Metadata.FindKey(StoredNameKey) >= 0 {
			renamed = true
			break
		}
	}
	if !renamed {
		return s
	}
	fields := s.Fields()
	for i, f := range fields {
		fields[i] = storedField(f)
	}
	md := s.Metadata()
	return arrow.NewSchema(fields, &md)
}

// storedField is f under its stored name, without StoredNameKey.
func storedField(f arrow.Field) arrow.Field {
	i := f.Metadata.FindKey(StoredNameKey)
	if i < 0 {
		return f
	}
	f.Name = StoredName(f)
	keys, vals := slices.Clone(f.Metadata.Keys()), slices.Clone(f.Metadata.Values())
	keys, vals = slices.Delete(keys, i, i+1), slices.Delete(vals, i, i+1)
	if len(keys) == 0 {
		f.Metadata = arrow.Metadata{}
	} else {
		f.Metadata = arrow.NewMetadata(keys, vals)
	}
	return f
}

// PlainSchema returns s without the metadata schema evolution keeps in
// it: the schema a reader of rows is given.
func PlainSchema(s *arrow.Schema) *arrow.Schema {
	if !Evolved(s) {
		return s
	}
	fields := s.Fields()
	for i, f := range fields {
		fields[i] = PlainField(f)
	}
	md := s.Metadata()
	var keys, vals []string
	for i, k := range md.Keys() {
		if k != SchemaIDKey && k != RetiredKey {
			keys, vals = append(keys, k), append(vals, md.Values()[i])
		}
	}
	if len(keys) == 0 {
		return arrow.NewSchema(fields, nil)
	}
	out := arrow.NewMetadata(keys, vals)
	return arrow.NewSchema(fields, &out)
}

// PlainField is f without StoredNameKey.
func PlainField(f arrow.Field) arrow.Field {
	if f.Metadata.FindKey(StoredNameKey) < 0 {
		return f
	}
	name := f.Name
	f = storedField(f)
	f.Name = name
	return f
}

// checkStoredNames refuses a schema whose stored names repeat, or reuse a
// retired one.
func checkStoredNames(s *arrow.Schema) error {
	seen := map[string]string{}
	for _, r := range RetiredNames(s) {
		seen[r] = ""
	}
	for _, f := range s.Fields() {
		sn := StoredName(f)
		if other, dup := seen[sn]; dup {
			if other == "" {
				return fmt.Errorf("%w: column %q is stored as %q, the name of a dropped column", ErrBadSchemaChange, f.Name, sn)
			}
			return fmt.Errorf("%w: columns %q and %q are both stored as %q", ErrBadSchemaChange, other, f.Name, sn)
		}
		seen[sn] = f.Name
	}
	return nil
}

// Batch brings rec, rows written under this or an earlier schema of
// the table whose schema is now want, to want: its columns found by stored
// name (see StoredName: rec may carry stored or current names), a column
// added since as nulls, one dropped since left out, one widened since
// converted. The caller releases the result. It fails when a column of
// want is missing and not nullable, or a type does not convert.
func Batch(mem memory.Allocator, want *arrow.Schema, rec arrow.RecordBatch) (arrow.RecordBatch, error) {
	return evolveBatch(mem, want, rec, false)
}

// BatchDropping is Batch for rows of a schema the table no
// longer descends from (written before a restore to an older version):
// their columns the table does not know are left out.
func BatchDropping(mem memory.Allocator, want *arrow.Schema, rec arrow.RecordBatch) (arrow.RecordBatch, error) {
	return evolveBatch(mem, want, rec, true)
}

func evolveBatch(mem memory.Allocator, want *arrow.Schema, rec arrow.RecordBatch, dropUnknown bool) (arrow.RecordBatch, error) {
	if mem == nil {
		mem = memory.DefaultAllocator
	}
	have := map[string]int{}
	for i, f := range rec.Schema().Fields() {
		have[StoredName(f)] = i
	}
	known := map[string]bool{}
	for _, f := range want.Fields() {
		known[StoredName(f)] = true
	}
	for _, r := range RetiredNames(want) {
		known[r] = true
	}
	for sn := range have {
		if !known[sn] && !dropUnknown {
			return nil, fmt.Errorf("table: column %q is not a column of the table, nor one dropped from it", sn)
		}
	}
	cols := make([]arrow.Array, want.NumFields())
	defer func() {
		for _, c := range cols {
			if c != nil {
				c.Release()
			}
		}
	}()
	for i, f := range want.Fields() {
		j, ok := have[StoredName(f)]
		if !ok {
			if !f.Nullable {
				return nil, fmt.Errorf("table: column %q (stored as %q) is missing and cannot be null", f.Name, StoredName(f))
			}
			cols[i] = array.MakeArrayOfNull(mem, f.Type, int(rec.NumRows()))
			continue
		}
		a, err := adapt(mem, f.Type, rec.Column(j), f.Name)
		if err != nil {
			return nil, err
		}
		cols[i] = a
	}
	return array.NewRecordBatch(want, cols, rec.NumRows()), nil
}

// FormerNames maps the first name of each renamed column of s (its stored
// name) to its position, where no column has that name now: rows written
// for the schema before the rename name it so, and readers of rows take
// it (see Conform).
func FormerNames(s *arrow.Schema) map[string]int {
	var out map[string]int
	for i, f := range s.Fields() {
		if sn := StoredName(f); sn != f.Name && len(s.FieldIndices(sn)) == 0 {
			if out == nil {
				out = map[string]int{}
			}
			out[sn] = i
		}
	}
	return out
}
