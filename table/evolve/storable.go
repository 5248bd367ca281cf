package evolve

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow"
)

// ErrUnsupportedSchema: a schema Strata cannot store. Always wrapped in
// an *UnsupportedSchemaError.
var ErrUnsupportedSchema = errors.New("schema cannot be stored")

// ErrReservedName: a column is named like a column Strata adds to rows
// it answers (ReservedColumns). Always wrapped in a *ReservedNameError.
var ErrReservedName = errors.New("column name is reserved")

// Columns the change feed (package table/changes) adds to every row it
// answers.
const (
	ChangeColumn  = "_change"
	VersionColumn = "_version"
	// UnitColumn is added by a consumer group's follow: the unit of
	// change a row is of (changes.FollowGroup).
	UnitColumn = "_unit"
)

// ReservedColumns are the names a table's columns cannot take: the change
// feed (Changes, WithChangeColumns) adds them to every row it answers, and
// a column of the same name would be shadowed there.
var ReservedColumns = []string{ChangeColumn, VersionColumn, UnitColumn}

// ReservedNameError names a column that takes a reserved name.
type ReservedNameError struct {
	Column string
}

func (e *ReservedNameError) Error() string {
	n := len(ReservedColumns)
	return fmt.Sprintf("table: column %q: the names %s and %s are reserved for the columns the change feed adds; name the column otherwise",
		e.Column, strings.Join(ReservedColumns[:n-1], ", "), ReservedColumns[n-1])
}

// Is makes errors.Is(err, ErrReservedName) and errors.Is(err,
// ErrUnsupportedSchema) true.
func (e *ReservedNameError) Is(target error) bool {
	return target == ErrReservedName || target == ErrUnsupportedSchema
}

// CheckReservedName refuses a top-level column name that is reserved
// (ReservedColumns) with a *ReservedNameError.
func CheckReservedName(name string) error {
	if slices.Contains(ReservedColumns, name) {
		return &ReservedNameError{Column: name}
	}
	return nil
}

// UnsupportedSchemaError names the field Strata cannot store and why.
type UnsupportedSchemaError struct {
	Field  string // path of the field; "" for the schema as a whole
	Reason string
}

func (e *UnsupportedSchemaError) Error() string {
	if e.Field == "" {
		return "table: schema cannot be stored: " + e.Reason
	}
	return fmt.Sprintf("table: schema cannot be stored: field %q: %s", e.Field, e.Reason)
}

// Is makes errors.Is(err, ErrUnsupportedSchema) true.
func (e *UnsupportedSchemaError) Is(target error) bool { return target == ErrUnsupportedSchema }

// NormalizeSchema returns s with dictionary-encoded types replaced by
// their value types, at any depth: a table stores values, and batches
// that arrive dictionary-encoded are decoded on the way in.
func NormalizeSchema(s *arrow.Schema) *arrow.Schema {
	fields := make([]arrow.Field, s.NumFields())
	for i, f := range s.Fields() {
		f.Type = normalizeType(f.Type)
		fields[i] = f
	}
	md := s.Metadata()
	return arrow.NewSchema(fields, &md)
}

func normalizeType(t arrow.DataType) arrow.DataType {
	switch t := t.(type) {
	case *arrow.DictionaryType:
		return normalizeType(t.ValueType)
	case *arrow.StructType:
		fields := t.Fields()
		for i := range fields {
			fields[i].Type = normalizeType(fields[i].Type)
		}
		return arrow.StructOf(fields...)
	case *arrow.ListType:
		f := t.ElemField()
		f.Type = normalizeType(f.Type)
		return arrow.ListOfField(f)
	case *arrow.LargeListType:
		f := t.ElemField()
		f.Type = normalizeType(f.Type)
		return arrow.LargeListOfField(f)
	case *arrow.MapType:
		m := arrow.MapOfWithMetadata(normalizeType(t.KeyType()), t.KeyField().Metadata,
			normalizeType(t.ItemType()), t.ItemField().Metadata)
		m.SetItemNullable(t.ItemField().Nullable)
		m.KeysSorted = t.KeysSorted
		return m
	}
	return t
}

// CheckStorable refuses a schema Strata cannot store and read back as it
// was given: no fields, empty or repeated names (at any depth), names that
// are not UTF-8, hold a control character or run over maxNameBytes, and types
// the Parquet fragments cannot hold faithfully (unions, views, intervals,
// durations, date64, fixed-size lists, run-end encoding, extension
// types, the null type), and timestamps in a time zone Arrow does not
// know. Dictionary types are refused too: normalize the schema first
// (NormalizeSchema).
func CheckStorable(s *arrow.Schema) error {
	if s == nil || s.NumFields() == 0 {
		return &UnsupportedSchemaError{Reason: "a table needs at least one column"}
	}
	if err := checkFields("", s.Fields(), 0); err != nil {
		return err
	}
	return checkStoredNames(s)
}

// CheckReservedNames refuses a schema of a new table (a create, an
// overwrite) whose top-level column takes a reserved name
// (ReservedColumns), with a *ReservedNameError. A schema change refuses
// such a name where it adds or renames a column (AlterSchema); a table
// made before the names were reserved keeps its columns.
func CheckReservedNames(s *arrow.Schema) error {
	for _, f := range s.Fields() {
		if err := CheckReservedName(f.Name); err != nil {
			return err
		}
	}
	return nil
}

const maxNesting = 32

// maxNameBytes bounds a column's name. Each fragment's entry in a manifest
// repeats the names of its columns (with their statistics), so that names
// of any length would make every commit encode, and every reader decode,
// fragments × names bytes.
const maxNameBytes = 1024

// checkName refuses a name that is not UTF-8 (JSON, in which names are
// shown and written, would replace its bytes), that holds a control
// character (a newline in a CSV header, a NUL to C readers of the
// Parquet), or that is longer than maxNameBytes; "" when it is fine.
func checkName(name string) string {
	switch {
	case !utf8.ValidString(name):
		return "the name is not UTF-8"
	case len(name) > maxNameBytes:
		return fmt.Sprintf("the name is %d bytes long; at most %d", len(name), maxNameBytes)
	}
	for _, r := range name {
		if unicode.IsControl(r) {
			return fmt.Sprintf("the name holds the control character %U", r)
		}
	}
	return ""
}

func checkFields(parent string, fields []arrow.Field, depth int) error {
	if depth > maxNesting {
		return &UnsupportedSchemaError{Field: parent, Reason: fmt.Sprintf("nested more than %d levels deep", maxNesting)}
	}
	seen := make(map[string]bool, len(fields))
	for _, f := range fields {
		path := f.Name
		if parent != "" {
			path = parent + "." + f.Name
		}
		if f.Name == "" {
			return &UnsupportedSchemaError{Field: parent, Reason: "a column has an empty name"}
		}
		if why := checkName(f.Name); why != "" {
			if len(path) > 80 {
				path = strings.ToValidUTF8(path[:80], "?") + "…"
			}
			return &UnsupportedSchemaError{Field: path, Reason: why}
		}
		if seen[f.Name] {
			return &UnsupportedSchemaError{Field: path, Reason: "the name is used twice"}
		}
		seen[f.Name] = true
		if err := checkType(path, f.Type, depth); err != nil {
			return err
		}
	}
	return nil
}

func checkType(path string, t arrow.DataType, depth int) error {
	unsupported := func(why string) error {
		return &UnsupportedSchemaError{Field: path, Reason: fmt.Sprintf("type %s is not supported: %s", t, why)}
	}
	switch t.ID() {
	case arrow.BOOL, arrow.INT8, arrow.INT16, arrow.INT32, arrow.INT64,
		arrow.UINT8, arrow.UINT16, arrow.UINT32, arrow.UINT64,
		arrow.FLOAT16, arrow.FLOAT32, arrow.FLOAT64,
		arrow.STRING, arrow.LARGE_STRING, arrow.BINARY, arrow.LARGE_BINARY, arrow.FIXED_SIZE_BINARY,
		arrow.DATE32, arrow.TIME32, arrow.TIME64, arrow.DECIMAL128, arrow.DECIMAL256:
		return nil
	case arrow.TIMESTAMP:
		return checkZone(path, t.(*arrow.TimestampType).TimeZone)
	case arrow.STRUCT:
		st := t.(*arrow.StructType)
		if st.NumFields() == 0 {
			return unsupported("a struct needs at least one field")
		}
		return checkFields(path, st.Fields(), depth+1)
	case arrow.LIST, arrow.LARGE_LIST:
		return checkType(path+"[]", t.(arrow.ListLikeType).Elem(), depth+1)
	case arrow.MAP:
		m := t.(*arrow.MapType)
		if err := checkType(path+".key", m.KeyType(), depth+1); err != nil {
			return err
		}
		return checkType(path+".value", m.ItemType(), depth+1)
	case arrow.DICTIONARY:
		return unsupported("store the value type (dictionary-encoded input is decoded on append)")
	case arrow.DATE64:
		return unsupported("Parquet keeps whole days only; use date32 or a timestamp")
	case arrow.FIXED_SIZE_LIST:
		return unsupported("use a list")
	case arrow.DENSE_UNION, arrow.SPARSE_UNION:
		return unsupported("unions cannot be stored")
	default:
		return unsupported("Parquet fragments cannot hold it faithfully")
	}
}

// checkZone refuses a timestamp's time zone that Arrow cannot resolve: its
// values could be stored, but never shown (every one prints as "..." in
// CSV and JSON). Arrow resolves "" and "UTC", the names of the time zone
// database, and fixed offsets such as "+02:00".
func checkZone(path, zone string) error {
	if _, err := (&arrow.TimestampType{TimeZone: zone}).GetZone(); err != nil {
		return &UnsupportedSchemaError{Field: path, Reason: fmt.Sprintf(
			"unknown time zone %q: want a name of the time zone database (\"UTC\", \"Europe/Paris\") or an offset such as \"+02:00\"", zone)}
	}
	return nil
}
