package evolve

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
)

// ChangeOp is what a ColumnChange does.
type ChangeOp string

// Column changes (see evolve.go for how fragments written before them read).
const (
	// AddColumn adds a nullable column at the end; older rows read null.
	AddColumn ChangeOp = "add"
	// RenameColumn gives a column a new name; its values keep their
	// stored name.
	RenameColumn ChangeOp = "rename"
	// DropColumn removes a column; its values stay in older fragments,
	// unread, until compaction rewrites them.
	DropColumn ChangeOp = "drop"
	// WidenColumn gives a column a wider type (a wider signed integer,
	// float64 for float32) or lets it hold nulls.
	WidenColumn ChangeOp = "widen"
	// ClusterBy sets the table's cluster key (Columns; none clears it), a
	// table setting rather than a schema change: compaction writes
	// fragments sorted by it (see ClusterKey).
	ClusterBy ChangeOp = "cluster_by"
)

// ColumnChange is one change of a schema: Op on the top-level Column.
type ColumnChange struct {
	Op     ChangeOp       `json:"op"`
	Column string         `json:"column"`
	To     string         `json:"to,omitempty"` // RenameColumn: the new name
	Type   arrow.DataType `json:"-"`            // AddColumn; WidenColumn (nil: keep)
	// Nullable: WidenColumn lets the column hold nulls.
	Nullable bool `json:"nullable,omitempty"`
	// Columns: ClusterBy's columns, most significant first.
	Columns []string `json:"columns,omitempty"`
}

func (c ColumnChange) String() string {
	switch c.Op {
	case AddColumn:
		if c.Type == nil {
			return "add " + c.Column
		}
		return fmt.Sprintf("add %s %s", c.Column, c.Type)
	case RenameColumn:
		return fmt.Sprintf("rename %s to %s", c.Column, c.To)
	case WidenColumn:
		s := "widen " + c.Column
		if c.Type != nil {
			s += " to " + c.Type.String()
		}
		if c.Nullable {
			s += " nullable"
		}
		return s
	case ClusterBy:
		if len(c.Columns) == 0 {
			return "cluster by nothing"
		}
		return "cluster by " + strings.Join(c.Columns, ", ")
	}
	return fmt.Sprintf("%s %s", c.Op, c.Column)
}

// AlterSchema returns s with changes applied in order, as one schema
// change: its id one more than s's. Every change is checked against the
// schema the ones before it made; the first refused is an error wrapping
// ErrBadSchemaChange that names it.
func AlterSchema(s *arrow.Schema, changes []ColumnChange) (*arrow.Schema, error) {
	if len(changes) == 0 {
		return nil, fmt.Errorf("%w: no change given", ErrBadSchemaChange)
	}
	if with, _ := CountFieldIDs(s); with > 0 {
		// Its fragments are read by field id elsewhere (the Iceberg
		// view's readers): a change would have to give ids, which a
		// table whose columns came with theirs does not take from here.
		return nil, fmt.Errorf("%w: the table's columns carry Parquet field ids (%s); its schema cannot change", ErrBadSchemaChange, FieldIDKey)
	}
	fields := s.Fields()
	retired := RetiredNames(s)
	id := SchemaID(s) + 1
	for _, c := range changes {
		var err error
		if fields, retired, err = alterOne(fields, retired, id, c); err != nil {
			return nil, err
		}
	}
	out := withEvolution(fields, s.Metadata(), id, retired)
	if err := CheckStorable(out); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadSchemaChange, err)
	}
	if err := checkStoredNames(out); err != nil {
		return nil, err
	}
	return out, nil
}

// alterOne applies one change to fields (retired: the stored names of
// dropped columns; id: the new schema's id).
func alterOne(fields []arrow.Field, retired []string, id uint64, c ColumnChange) ([]arrow.Field, []string, error) {
	refuse := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s: %s", ErrBadSchemaChange, c, fmt.Sprintf(format, args...))
	}
	at := slices.IndexFunc(fields, func(f arrow.Field) bool { return f.Name == c.Column })
	if c.Op != AddColumn && at < 0 {
		return nil, nil, refuse("the table has no column %q", c.Column)
	}
	switch c.Op {
	case AddColumn:
		if at >= 0 {
			return nil, nil, refuse("the table has a column %q already", c.Column)
		}
		if c.Type == nil {
			return nil, nil, refuse("give the new column's type")
		}
		if err := CheckReservedName(c.Column); err != nil {
			return nil, nil, fmt.Errorf("%w: %s: %w", ErrBadSchemaChange, c, err)
		}
		f := arrow.Field{Name: c.Column, Type: c.Type, Nullable: true}
		if sn := freshStoredName(fields, retired, c.Column, id); sn != c.Column {
			f.Metadata = arrow.NewMetadata([]string{StoredNameKey}, []string{sn})
		}
		return append(fields, f), retired, nil
	case RenameColumn:
		if c.To == "" || c.To == c.Column {
			return nil, nil, refuse("give a new name")
		}
		if err := CheckReservedName(c.To); err != nil {
			return nil, nil, fmt.Errorf("%w: %s: %w", ErrBadSchemaChange, c, err)
		}
		if slices.ContainsFunc(fields, func(f arrow.Field) bool { return f.Name == c.To }) {
			return nil, nil, refuse("the table has a column %q already", c.To)
		}
		f := PlainField(fields[at])
		if sn := StoredName(fields[at]); sn != c.To {
			f.Metadata = withMetadata(f.Metadata, StoredNameKey, sn)
		}
		f.Name = c.To
		fields[at] = f
		return fields, retired, nil
	case DropColumn:
		if len(fields) == 1 {
			return nil, nil, refuse("a table keeps at least one column")
		}
		gone := StoredName(fields[at])
		return slices.Delete(fields, at, at+1), append(retired, gone), nil
	case WidenColumn:
		f := fields[at]
		if c.Type == nil && !c.Nullable {
			return nil, nil, refuse("give a wider type, or nullable")
		}
		if c.Type != nil && !TypesEqual(c.Type, f.Type) {
			if !widens(c.Type, f.Type) {
				return nil, nil, refuse("%s does not widen to %s (a wider signed integer, or float64 for float32)", f.Type, c.Type)
			}
			f.Type = c.Type
		}
		f.Nullable = f.Nullable || c.Nullable
		fields[at] = f
		return fields, retired, nil
	}
	return nil, nil, refuse("unknown change %q (add, rename, drop or widen)", c.Op)
}

// widens: a column of type from may become type to, every value kept and
// every reader (the Iceberg view's too) agreeing: a wider signed integer,
// or float64 for float32.
func widens(to, from arrow.DataType) bool {
	rank := map[arrow.Type]int{arrow.INT8: 1, arrow.INT16: 2, arrow.INT32: 3, arrow.INT64: 4}
	if rank[from.ID()] > 0 && rank[to.ID()] > rank[from.ID()] {
		return true
	}
	return from.ID() == arrow.FLOAT32 && to.ID() == arrow.FLOAT64
}

// freshStoredName is the stored name of a column added as name: name
// itself, unless a live or dropped column is stored under it.
func freshStoredName(fields []arrow.Field, retired []string, name string, id uint64) string {
	taken := func(sn string) bool {
		return slices.Contains(retired, sn) || slices.ContainsFunc(fields, func(f arrow.Field) bool { return StoredName(f) == sn })
	}
	sn := name
	for n := 0; taken(sn); n++ {
		sn = fmt.Sprintf("%s~%d", name, id)
		if n > 0 {
			sn = fmt.Sprintf("%s~%d.%d", name, id, n)
		}
	}
	return sn
}

// withMetadata returns md with key set to value.
func withMetadata(md arrow.Metadata, key, value string) arrow.Metadata {
	keys, vals := slices.Clone(md.Keys()), slices.Clone(md.Values())
	if i := slices.Index(keys, key); i >= 0 {
		vals[i] = value
	} else {
		keys, vals = append(keys, key), append(vals, value)
	}
	return arrow.NewMetadata(keys, vals)
}

// RestoredSchema is the schema a restore of a version whose schema was
// old gives a table whose schema is cur: old's columns, with an id above
// both (ids are not given twice), and every stored name either used
// retired (so that a column added later never finds values of one the
// restore removed, in a fragment merged after it). A table never altered
// gets old as it is.
func RestoredSchema(old, cur *arrow.Schema) *arrow.Schema {
	if !Evolved(old) && !Evolved(cur) {
		return old
	}
	live := map[string]bool{}
	for _, f := range old.Fields() {
		live[StoredName(f)] = true
	}
	retired := RetiredNames(old)
	add := func(sn string) {
		if !live[sn] && !slices.Contains(retired, sn) {
			retired = append(retired, sn)
		}
	}
	for _, sn := range RetiredNames(cur) {
		add(sn)
	}
	for _, f := range cur.Fields() {
		add(StoredName(f))
	}
	return withEvolution(old.Fields(), old.Metadata(), max(SchemaID(old), SchemaID(cur))+1, retired)
}

// withEvolution is a schema of fields with metadata md, its schema id and
// retired names set.
func withEvolution(fields []arrow.Field, md arrow.Metadata, id uint64, retired []string) *arrow.Schema {
	md = withMetadata(md, SchemaIDKey, strconv.FormatUint(id, 10))
	if len(retired) > 0 {
		b, _ := json.Marshal(retired)
		md = withMetadata(md, RetiredKey, string(b))
	}
	return arrow.NewSchema(fields, &md)
}

// FieldIDKey is the field metadata through which Arrow schemas carry
// Parquet field ids (pqarrow writes it into the fragments).
const FieldIDKey = "PARQUET:field_id"

// CountFieldIDs counts the fields of sc, at every depth, with a Parquet
// field id (a non-negative one: -1 means none) and without.
func CountFieldIDs(sc *arrow.Schema) (with, without int) {
	var walk func(f arrow.Field)
	walk = func(f arrow.Field) {
		if v, ok := f.Metadata.GetValue(FieldIDKey); ok && v != "" && v[0] != '-' {
			with++
		} else {
			without++
		}
		switch t := f.Type.(type) {
		case *arrow.MapType:
			walk(t.KeyField())
			walk(t.ItemField())
		case arrow.ListLikeType:
			walk(t.ElemField())
		case *arrow.StructType:
			for _, c := range t.Fields() {
				walk(c)
			}
		}
	}
	for _, f := range sc.Fields() {
		walk(f)
	}
	return with, without
}

// StoredNames are the stored names of columns cols of sc (a name sc
// lacks stays as it is).
func StoredNames(sc *arrow.Schema, cols []string) []string {
	out := make([]string, len(cols))
	for i, c := range cols {
		out[i] = c
		if fi := sc.FieldIndices(c); len(fi) == 1 {
			out[i] = StoredName(sc.Field(fi[0]))
		}
	}
	return out
}
