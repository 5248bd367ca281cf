package lakehouse

import (
	"fmt"
	"maps"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/iceberg-go"
	itable "github.com/apache/iceberg-go/table"

	"github.com/stratadb/strata/lakehouse/layout"
	"github.com/stratadb/strata/table/evolve"
)

// checkExportable refuses column types whose values an Iceberg reader
// would read differently from Strata.
func checkExportable(sc *arrow.Schema) error {
	var walk func(name string, dt arrow.DataType) error
	walk = func(name string, dt arrow.DataType) error {
		bad := func(why string) error {
			return fmt.Errorf("%w: column %q is %s: %s", layout.ErrUnsupported, name, dt, why)
		}
		switch t := dt.(type) {
		case *arrow.Uint64Type:
			return bad("Iceberg's widest integer is a signed 64-bit long, so values above 2^63-1 would read negative")
		case *arrow.Uint32Type:
			return bad("its Parquet column is a 32-bit integer, which Iceberg reads as a signed int, so values above 2^31-1 would not read")
		case *arrow.Float16Type:
			return bad("Iceberg has no half-precision float")
		case *arrow.Time32Type:
			return bad("Iceberg times are microseconds")
		case *arrow.TimestampType:
			if t.Unit == arrow.Nanosecond {
				return bad("format v2 timestamps are microseconds")
			}
			if t.TimeZone != "" && !slices.Contains([]string{"UTC", "+00:00", "Etc/UTC", "Z"}, t.TimeZone) {
				return bad("Iceberg keeps instants in UTC, not in a named zone")
			}
		case *arrow.Decimal256Type:
			if t.Precision > 38 {
				return bad("Iceberg decimals hold at most 38 digits")
			}
		case arrow.ListLikeType:
			return walk(name+".element", t.Elem())
		case *arrow.StructType:
			for _, f := range t.Fields() {
				if err := walk(name+"."+f.Name, f.Type); err != nil {
					return err
				}
			}
		}
		return nil
	}
	for _, f := range sc.Fields() {
		if err := walk(f.Name, f.Type); err != nil {
			return err
		}
	}
	return nil
}

// icebergSchema converts a version's Arrow schema for the view. A column
// keeps its field id across versions: found by its stored name in ids
// (stored name to field id, from the view's name mapping), or, for a view
// written before it had stored names, by name in prev (the view's current
// schema, nil for none). So a rename keeps the id (Iceberg's rename), a
// widened type keeps it (Iceberg's type promotion: int to long, float to
// double, required to optional), a column dropped and added again gets a
// new one (its stored name is new), and the one name mapping, by stored
// name, serves every snapshot. New columns get ids above lastID. Any other
// type change of a column is refused: older files would be read through
// the new column's mapping.
func icebergSchema(sc *arrow.Schema, prev *iceberg.Schema, lastID int, ids map[string]int) (*iceberg.Schema, error) {
	stored := sc
	sc = evolve.PlainSchema(sc) // what the view's readers see; stored names go to the mapping
	if err := checkExportable(sc); err != nil {
		return nil, err
	}
	switch withIDs, without := evolve.CountFieldIDs(sc); {
	case withIDs > 0 && without > 0:
		return nil, fmt.Errorf("%w: %d of the schema's fields carry Parquet field ids and %d do not; readers resolve a fragment's columns by its ids, so they must all have one or none", layout.ErrUnsupported, withIDs, without)
	case withIDs > 0:
		return schemaWithItsIDs(sc, prev)
	}
	fresh, err := itable.ArrowSchemaToIcebergWithFreshIDs(sc, false)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", layout.ErrUnsupported, err)
	}
	if prev == nil {
		return fresh, nil
	}
	next := lastID
	freshFields := fresh.Fields()
	byName := fieldsByName(prev.Fields())
	byID := make(map[int]iceberg.NestedField, len(byName))
	for _, f := range prev.Fields() {
		byID[f.ID] = f
	}
	fields := make([]iceberg.NestedField, 0, len(freshFields))
	for i, f := range freshFields {
		old, found := iceberg.NestedField{}, false
		if id, ok := ids[evolve.StoredName(stored.Field(i))]; ok {
			old, found = byID[id]
		} else if len(ids) == 0 {
			old, found = byName[f.Name]
		}
		if found {
			kept, err := keepID(old, f)
			if err != nil {
				return nil, err
			}
			fields = append(fields, kept)
			continue
		}
		one, err := iceberg.AssignFreshSchemaIDs(iceberg.NewSchema(0, f), func() int { next++; return next })
		if err != nil {
			return nil, err
		}
		fields = append(fields, one.Fields()[0])
	}
	return iceberg.NewSchema(0, fields...), nil
}

// keepID is column f (fresh ids) under old's field id, renamed and its
// type promoted as f has them; a change Iceberg cannot express is refused.
func keepID(old, f iceberg.NestedField) (iceberg.NestedField, error) {
	same, err := sameType(old, f)
	if err != nil {
		return old, err
	}
	kept := old
	kept.Name, kept.Doc = f.Name, f.Doc
	if same {
		return kept, nil
	}
	switch {
	case old.Type.Equals(f.Type) && old.Required && !f.Required:
	case old.Type.Equals(iceberg.PrimitiveTypes.Int32) && f.Type.Equals(iceberg.PrimitiveTypes.Int64),
		old.Type.Equals(iceberg.PrimitiveTypes.Float32) && f.Type.Equals(iceberg.PrimitiveTypes.Float64):
		kept.Type = f.Type
	default:
		return old, fmt.Errorf("%w: column %q changed type from %s to %s; older snapshots would read it through the new type (delete %s to start the view afresh)",
			layout.ErrUnsupported, f.Name, old.Type, f.Type, layout.MetadataDir)
	}
	kept.Required = f.Required
	return kept, nil
}

// sameType compares two fields' types ignoring their ids.
func sameType(a, b iceberg.NestedField) (bool, error) {
	ra, err := iceberg.AssignFreshSchemaIDs(iceberg.NewSchema(0, a), nil)
	if err != nil {
		return false, err
	}
	rb, err := iceberg.AssignFreshSchemaIDs(iceberg.NewSchema(0, b), nil)
	if err != nil {
		return false, err
	}
	return ra.Fields()[0].Type.Equals(rb.Fields()[0].Type) && a.Required == b.Required, nil
}

// schemaWithItsIDs converts a schema whose fields carry Parquet field ids
// keeping those ids: the fragments were written with them, and readers
// resolve a file's columns by its ids before any name mapping. Against
// prev, a column must keep its id and type, and no id may change column.
func schemaWithItsIDs(sc *arrow.Schema, prev *iceberg.Schema) (*iceberg.Schema, error) {
	out, err := itable.ArrowSchemaToIceberg(sc, false, nil)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", layout.ErrUnsupported, err)
	}
	if prev == nil {
		return out, nil
	}
	prevFields := prev.Fields()
	byName, byID := fieldsByName(prevFields), make(map[int]iceberg.NestedField, len(prevFields))
	for _, f := range prevFields {
		byID[f.ID] = f
	}
	for _, f := range out.Fields() {
		if old, ok := byName[f.Name]; ok && old.ID != f.ID {
			return nil, fmt.Errorf("%w: column %q changed field id from %d to %d (delete %s to start the view afresh)", layout.ErrUnsupported, f.Name, old.ID, f.ID, layout.MetadataDir)
		} else if ok {
			if same, err := sameType(old, f); err != nil || !same {
				return nil, fmt.Errorf("%w: column %q changed type from %s to %s (delete %s to start the view afresh)", layout.ErrUnsupported, f.Name, old.Type, f.Type, layout.MetadataDir)
			}
		}
		if old, ok := byID[f.ID]; ok && old.Name != f.Name {
			return nil, fmt.Errorf("%w: field id %d moved from column %q to %q (delete %s to start the view afresh)", layout.ErrUnsupported, f.ID, old.Name, f.Name, layout.MetadataDir)
		}
	}
	return out, nil
}

// fieldsByName indexes a schema's top-level fields by name, the first of
// a name. (A schema's Fields copies them all: a loop over columns takes
// them once, and finds each by name through this index, not by a search
// of them all.)
func fieldsByName(fields []iceberg.NestedField) map[string]iceberg.NestedField {
	out := make(map[string]iceberg.NestedField, len(fields))
	for _, f := range fields {
		if _, dup := out[f.Name]; !dup {
			out[f.Name] = f
		}
	}
	return out
}

// storedIDs reads a view's name mapping as stored name to field id (its
// top-level entries' names are stored names; see nameMapping).
func storedIDs(nm iceberg.NameMapping) map[string]int {
	out := map[string]int{}
	for _, f := range nm {
		if f.FieldID == nil {
			continue
		}
		for _, n := range f.Names {
			out[n] = *f.FieldID
		}
	}
	return out
}

// nameMapping is the view's name mapping for schema sc (the view's
// current schema) over Arrow schema arrowSchema, the same columns: data
// files hold a column under its stored name, which is the one name a
// top-level entry gives (a nested field keeps its own). Columns dropped
// since (in ids, stored name to field id, and not in sc) keep an entry,
// so that older snapshots still read them.
func nameMapping(sc *iceberg.Schema, arrowSchema *arrow.Schema, ids map[string]int) iceberg.NameMapping {
	nm := sc.NameMapping()
	live := map[int]bool{}
	for i := range nm {
		if i < arrowSchema.NumFields() {
			nm[i].Names = []string{evolve.StoredName(arrowSchema.Field(i))}
		}
		if nm[i].FieldID != nil {
			live[*nm[i].FieldID] = true
		}
	}
	for _, sn := range slices.Sorted(maps.Keys(ids)) {
		if id := ids[sn]; !live[id] {
			nm = append(nm, iceberg.MappedField{Names: []string{sn}, FieldID: &id})
		}
	}
	return nm
}
