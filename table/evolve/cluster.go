package evolve

import (
	"fmt"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"
)

// A table's cluster key is a table setting an Alter sets (a ClusterBy
// change): up to MaxClusterColumns top-level columns of a type with an
// order, held by their stored names, so that a rename keeps the key and a
// drop ends it at the dropped column (KeepClusterKey). Compaction writes
// fragments whose rows are sorted by it, ascending and nulls last, so
// that row groups' statistics rule out most of them for a filter on it.

// MaxClusterColumns bounds a cluster key: past the first few columns, a
// sort orders nothing a filter prunes by.
const MaxClusterColumns = 4

// SplitChanges separates an Alter's schema changes from its ClusterBy
// change (nil when there is none). Two ClusterBy changes are refused, as
// is a change with a field its op does not take (a ClusterBy's Column, a
// column change's Columns): a misspelt change must not pass for another.
func SplitChanges(changes []ColumnChange) (schema []ColumnChange, cluster *ColumnChange, err error) {
	for i := range changes {
		c := changes[i]
		if c.Op != ClusterBy {
			if c.Columns != nil {
				return nil, nil, fmt.Errorf(`%w: %s: "columns" is for cluster_by; a column change names its column in "column"`, ErrBadSchemaChange, c)
			}
			schema = append(schema, c)
			continue
		}
		if c.Column != "" || c.To != "" || c.Type != nil || c.Nullable {
			return nil, nil, fmt.Errorf("%w: cluster_by takes its columns in columns, and nothing else (column, to, type, nullable)", ErrBadSchemaChange)
		}
		if cluster != nil {
			return nil, nil, fmt.Errorf("%w: give the cluster key once, not %q and %q", ErrBadSchemaChange, cluster, changes[i])
		}
		cluster = &changes[i]
	}
	return schema, cluster, nil
}

// ClusterKey checks columns as a cluster key of schema s and returns
// their stored names (none: nil, which clears the key).
func ClusterKey(s *arrow.Schema, columns []string) ([]string, error) {
	refuse := func(format string, args ...any) error {
		return fmt.Errorf("%w: cluster by %v: %s", ErrBadSchemaChange, columns, fmt.Sprintf(format, args...))
	}
	if len(columns) > MaxClusterColumns {
		return nil, refuse("at most %d columns", MaxClusterColumns)
	}
	var stored []string
	for i, col := range columns {
		if slices.Contains(columns[:i], col) {
			return nil, refuse("column %q is given twice", col)
		}
		idx := s.FieldIndices(col)
		if len(idx) != 1 {
			return nil, refuse("the table has no column %q", col)
		}
		f := s.Field(idx[0])
		if !orderable(f.Type) {
			return nil, refuse("column %q is of type %s, which has no order to sort by (integers, floats, strings, binaries, booleans, dates, times and timestamps do)", col, f.Type)
		}
		stored = append(stored, StoredName(f))
	}
	return stored, nil
}

// orderable: a cluster key column's type, one compaction sorts by and
// row groups' statistics bound.
func orderable(t arrow.DataType) bool {
	switch t.ID() {
	case arrow.BOOL, arrow.INT8, arrow.INT16, arrow.INT32, arrow.INT64,
		arrow.UINT8, arrow.UINT16, arrow.UINT32, arrow.UINT64,
		arrow.FLOAT32, arrow.FLOAT64, arrow.STRING, arrow.LARGE_STRING,
		arrow.BINARY, arrow.LARGE_BINARY, arrow.DATE32, arrow.TIMESTAMP, arrow.TIME64:
		return true
	}
	return false
}

// ClusterColumns returns the names in s of the columns stored under
// stored, a cluster key, and their indices; false when a column of it is
// no longer in s (a restore to a schema before it) or no longer of a type
// with an order: the key then sorts nothing.
func ClusterColumns(s *arrow.Schema, stored []string) (names []string, indices []int, ok bool) {
	if len(stored) == 0 || s == nil {
		return nil, nil, false
	}
	for _, sn := range stored {
		at := slices.IndexFunc(s.Fields(), func(f arrow.Field) bool { return StoredName(f) == sn })
		if at < 0 || !orderable(s.Field(at).Type) {
			return nil, nil, false
		}
		names, indices = append(names, s.Field(at).Name), append(indices, at)
	}
	return names, indices, true
}

// KeepClusterKey is what is left of cluster key stored under schema s,
// whose columns an Alter may have dropped: the columns before the first
// one dropped (a sort by a, b is still one by a; one by b is not).
func KeepClusterKey(s *arrow.Schema, stored []string) []string {
	for i, sn := range stored {
		if !slices.ContainsFunc(s.Fields(), func(f arrow.Field) bool { return StoredName(f) == sn }) {
			stored = stored[:i]
			break
		}
	}
	if len(stored) == 0 {
		return nil
	}
	return slices.Clone(stored)
}
