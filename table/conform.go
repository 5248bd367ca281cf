package table

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/compute"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// What a table accepts. Every path that brings rows in (the HTTP server,
// the CLI, Table.Append, Shard.Append, Create with rows) passes them
// through Conform before anything is written, so that a WAL entry or a
// fragment never holds a value the table's schema does not allow:
//
//   - the batch's Arrow data is consistent (offsets, lengths, null counts,
//     children, UTF-8), checked in full (array.ValidateRecordFull);
//   - its columns are matched to the table's by name: a missing nullable
//     column becomes nulls, a missing non-nullable one is an error, an
//     unknown one is an error unless the caller asks to ignore it;
//   - a column's type is the table's, or one that converts without loss
//     (see adapt);
//   - no non-nullable column, at any depth, holds a null.

// ErrBadInput: rows that the table cannot take as they are. Always
// wrapped in an *InputError.
var ErrBadInput = errors.New("rows do not fit the table")

// ErrUnsupportedSchema: a schema Strata cannot store. Always wrapped in
// an *UnsupportedSchemaError.
var ErrUnsupportedSchema = errors.New("schema cannot be stored")

// InputError says where input went wrong: the row (counted from 0 over
// the whole input; -1 when the error is not about one row), the column
// (a path such as "meta.tags", "" when not about one column), and for a
// type mismatch both types.
type InputError struct {
	Row       int64
	Column    string
	Want, Got string
	Reason    string
	// Schema: the input's columns or types do not match the table's
	// (errors.Is(err, ErrSchemaMismatch) holds too).
	Schema bool
}

func (e *InputError) Error() string {
	var b strings.Builder
	b.WriteString("table: ")
	if e.Row >= 0 {
		fmt.Fprintf(&b, "row %d: ", e.Row)
	}
	if e.Column != "" {
		fmt.Fprintf(&b, "column %q: ", e.Column)
	}
	b.WriteString(e.Reason)
	switch {
	case e.Want != "" && e.Got != "":
		fmt.Fprintf(&b, " (table: %s; input: %s)", e.Want, e.Got)
	case e.Want != "":
		fmt.Fprintf(&b, " (table: %s)", e.Want)
	case e.Got != "":
		fmt.Fprintf(&b, " (input: %s)", e.Got)
	}
	return b.String()
}

// Is makes errors.Is(err, ErrBadInput) true, and ErrSchemaMismatch too
// when the columns or types do not match.
func (e *InputError) Is(target error) bool {
	return target == ErrBadInput || (e.Schema && target == ErrSchemaMismatch)
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
	return checkFields("", s.Fields(), 0)
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

// ConformOptions shape Conform.
type ConformOptions struct {
	// IgnoreUnknown drops input columns the table does not have, instead
	// of refusing the batch.
	IgnoreUnknown bool
	// RowBase is the row number of the batch's first row in the whole
	// input, so that errors name rows as the caller counts them.
	RowBase int64
	// Allocator for converted columns (nil: the Go allocator).
	Allocator memory.Allocator
}

// Conform checks rec against the table's schema want and returns a batch
// of exactly that schema holding the same values, or an *InputError (or a
// *SchemaError when the columns do not match). The caller releases the
// result; rec is not released. It never panics on malformed input.
func Conform(want *arrow.Schema, rec arrow.RecordBatch, o ConformOptions) (out arrow.RecordBatch, err error) {
	defer func() {
		if r := recover(); r != nil {
			out, err = nil, &InputError{Row: -1, Reason: fmt.Sprintf("malformed Arrow data: %v", r)}
		}
	}()
	if o.Allocator == nil {
		o.Allocator = memory.DefaultAllocator
	}
	if err := validateRecord(rec); err != nil {
		return nil, err
	}
	got := rec.Schema()
	byName := make(map[string]int, got.NumFields())
	for i, f := range got.Fields() {
		if _, dup := byName[f.Name]; dup {
			return nil, &InputError{Row: -1, Column: f.Name, Reason: "the input has this column twice", Schema: true}
		}
		byName[f.Name] = i
	}
	if !o.IgnoreUnknown {
		for _, f := range got.Fields() {
			if len(want.FieldIndices(f.Name)) == 0 {
				return nil, &InputError{Row: -1, Column: f.Name, Reason: fmt.Sprintf("the table has no such column (it has %s)", fieldNames(want)), Schema: true}
			}
		}
	}
	n := rec.NumRows()
	cols := make([]arrow.Array, 0, want.NumFields())
	defer func() {
		for _, c := range cols {
			c.Release()
		}
	}()
	for _, wf := range want.Fields() {
		i, ok := byName[wf.Name]
		if !ok {
			if !wf.Nullable {
				return nil, &InputError{Row: -1, Column: wf.Name, Reason: "a non-nullable column is missing", Schema: true}
			}
			cols = append(cols, array.MakeArrayOfNull(o.Allocator, wf.Type, int(n)))
			continue
		}
		a, err := adapt(o.Allocator, wf.Type, rec.Column(i), wf.Name)
		if err != nil {
			return nil, err
		}
		cols = append(cols, a)
		if err := checkNulls(wf, a, o.RowBase, wf.Name); err != nil {
			return nil, err
		}
	}
	return array.NewRecordBatch(want, cols, n), nil
}

// validateRecord checks a batch's data in full before anything reads its
// values: malformed data could otherwise make readers panic or allocate
// without bound.
func validateRecord(rec arrow.RecordBatch) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = &InputError{Row: -1, Reason: fmt.Sprintf("malformed Arrow data: %v", r)}
		}
	}()
	schema := rec.Schema()
	if int(rec.NumCols()) != schema.NumFields() {
		return &InputError{Row: -1, Reason: fmt.Sprintf("batch has %d columns, its schema %d", rec.NumCols(), schema.NumFields())}
	}
	for i := range schema.NumFields() {
		col := rec.Column(i)
		name := schema.Field(i).Name
		if int64(col.Len()) != rec.NumRows() {
			return &InputError{Row: -1, Column: name, Reason: fmt.Sprintf("column holds %d values, the batch %d rows", col.Len(), rec.NumRows())}
		}
		if !TypesEqual(col.DataType(), schema.Field(i).Type) {
			return &InputError{Row: -1, Column: name, Reason: "column data does not have the type its schema says"}
		}
		if err := array.ValidateFull(col); err != nil {
			return &InputError{Row: -1, Column: name, Reason: "malformed Arrow data: " + err.Error()}
		}
	}
	return nil
}

func fieldNames(s *arrow.Schema) string {
	names := make([]string, s.NumFields())
	for i, f := range s.Fields() {
		names[i] = f.Name
	}
	return strings.Join(names, ", ")
}

// adapt returns arr as type want, without losing a value: the same type;
// the same physical layout under other field names or nullability
// (relabelled without a copy; nulls are checked separately); dictionary
// values decoded; integers widened (signed to wider signed, unsigned to
// wider unsigned or signed); float32 to float64; string and binary to
// their large forms and back; timestamps of the same zone to a finer unit
// (overflow is an error). Anything else is refused with both types named.
func adapt(mem memory.Allocator, want arrow.DataType, arr arrow.Array, path string) (arrow.Array, error) {
	got := arr.DataType()
	if want == got {
		arr.Retain()
		return arr, nil
	}
	if sameLayout(want, got) {
		// Equal types too: the batch then carries the table's own type
		// values, which arrow-go's checks compare by identity first.
		return relabelArray(want, arr), nil
	}
	mismatch := func(reason string) error {
		return &InputError{Row: -1, Column: path, Want: want.String(), Got: got.String(), Reason: reason, Schema: true}
	}
	if d, ok := arr.(*array.Dictionary); ok {
		ctx := compute.WithAllocator(context.Background(), mem)
		values, err := compute.TakeArray(ctx, d.Dictionary(), d.Indices())
		if err != nil {
			return nil, mismatch("dictionary does not decode: " + err.Error())
		}
		defer values.Release()
		return adapt(mem, want, values, path)
	}
	if !losslessCast(want, got) {
		return nil, mismatch("the type cannot be converted without loss")
	}
	switch want.(type) {
	case *arrow.StructType, *arrow.MapType, *arrow.ListType, *arrow.LargeListType:
		return castNested(mem, want, arr, path)
	}
	ctx := compute.WithAllocator(context.Background(), mem)
	out, err := compute.CastArray(ctx, arr, compute.SafeCastOptions(want))
	if err != nil {
		return nil, mismatch("conversion failed: " + err.Error())
	}
	return out, nil
}

// castNested converts a nested array child by child (adapt), keeping its
// own buffers (validity, offsets) as they are.
func castNested(mem memory.Allocator, want arrow.DataType, arr arrow.Array, path string) (arrow.Array, error) {
	d := arr.Data()
	var wantChildren []arrow.DataType
	var names []string
	switch w := want.(type) {
	case *arrow.StructType:
		for _, f := range w.Fields() {
			wantChildren, names = append(wantChildren, f.Type), append(names, path+"."+f.Name)
		}
	case *arrow.MapType:
		wantChildren, names = []arrow.DataType{w.Elem()}, []string{path}
	case arrow.ListLikeType:
		wantChildren, names = []arrow.DataType{w.Elem()}, []string{path + "[]"}
	}
	children := make([]arrow.ArrayData, len(wantChildren))
	defer func() {
		for _, c := range children {
			if c != nil {
				c.Release()
			}
		}
	}()
	for i, cd := range d.Children() {
		in := array.MakeFromData(cd)
		out, err := adapt(mem, wantChildren[i], in, names[i])
		in.Release()
		if err != nil {
			return nil, err
		}
		children[i] = out.Data()
		children[i].Retain()
		out.Release()
	}
	nd := array.NewData(want, d.Len(), d.Buffers(), children, d.NullN(), d.Offset())
	defer nd.Release()
	return array.MakeFromData(nd), nil
}

// losslessCast: the conversions adapt makes with a safe cast, which
// fails on any value that would not survive: integers widened; float32
// to float64; string and binary to and from their large forms;
// timestamps of one zone to another unit (to a finer one always; to a
// coarser one when every value is whole in it — Parquet files keep no
// seconds, so a timestamp[s] column comes back from one as milliseconds);
// and lists, structs (same field names) and maps of those.
func losslessCast(want, got arrow.DataType) bool {
	w, g := want.ID(), got.ID()
	rank := func(id arrow.Type) int {
		switch id {
		case arrow.INT8, arrow.UINT8:
			return 1
		case arrow.INT16, arrow.UINT16:
			return 2
		case arrow.INT32, arrow.UINT32:
			return 3
		case arrow.INT64, arrow.UINT64:
			return 4
		}
		return 0
	}
	signed := func(id arrow.Type) bool {
		return id == arrow.INT8 || id == arrow.INT16 || id == arrow.INT32 || id == arrow.INT64
	}
	unsigned := func(id arrow.Type) bool {
		return id == arrow.UINT8 || id == arrow.UINT16 || id == arrow.UINT32 || id == arrow.UINT64
	}
	same := func(a, b arrow.DataType) bool { return sameLayout(a, b) || losslessCast(a, b) }
	switch {
	case signed(w) && signed(g):
		return rank(w) > rank(g)
	case unsigned(w) && unsigned(g):
		return rank(w) > rank(g)
	case signed(w) && unsigned(g):
		return rank(w) > rank(g)
	case w == arrow.FLOAT64 && g == arrow.FLOAT32:
		return true
	case (w == arrow.STRING || w == arrow.LARGE_STRING) && (g == arrow.STRING || g == arrow.LARGE_STRING):
		return true
	case (w == arrow.BINARY || w == arrow.LARGE_BINARY) && (g == arrow.BINARY || g == arrow.LARGE_BINARY):
		return true
	case w == arrow.TIMESTAMP && g == arrow.TIMESTAMP:
		return want.(*arrow.TimestampType).TimeZone == got.(*arrow.TimestampType).TimeZone
	case w == g && (w == arrow.LIST || w == arrow.LARGE_LIST):
		return same(want.(arrow.ListLikeType).Elem(), got.(arrow.ListLikeType).Elem())
	case w == arrow.MAP && g == arrow.MAP:
		wm, gm := want.(*arrow.MapType), got.(*arrow.MapType)
		return same(wm.KeyType(), gm.KeyType()) && same(wm.ItemType(), gm.ItemType())
	case w == arrow.STRUCT && g == arrow.STRUCT:
		ws, gs := want.(*arrow.StructType), got.(*arrow.StructType)
		if ws.NumFields() != gs.NumFields() {
			return false
		}
		for i := range ws.NumFields() {
			if ws.Field(i).Name != gs.Field(i).Name || !same(ws.Field(i).Type, gs.Field(i).Type) {
				return false
			}
		}
		return true
	}
	return false
}

// sameLayout reports whether two types have the same physical layout,
// differing at most in field names and nullability of nested fields.
func sameLayout(a, b arrow.DataType) bool {
	if a.ID() != b.ID() {
		return false
	}
	switch a := a.(type) {
	case *arrow.StructType:
		bs := b.(*arrow.StructType)
		if a.NumFields() != bs.NumFields() {
			return false
		}
		for i := range a.NumFields() {
			if a.Field(i).Name != bs.Field(i).Name || !sameLayout(a.Field(i).Type, bs.Field(i).Type) {
				return false
			}
		}
		return true
	case *arrow.MapType:
		bm := b.(*arrow.MapType)
		return sameLayout(a.KeyType(), bm.KeyType()) && sameLayout(a.ItemType(), bm.ItemType())
	case arrow.ListLikeType:
		return sameLayout(a.Elem(), b.(arrow.ListLikeType).Elem())
	}
	return TypesEqual(a, b)
}

// relabelArray is arr under the type want, of the same layout.
func relabelArray(want arrow.DataType, arr arrow.Array) arrow.Array {
	d := relabel(want, arr.Data())
	defer d.Release()
	return array.MakeFromData(d)
}

// relabel gives data the type want, which has the same layout; children
// are relabelled in turn. The buffers are shared.
func relabel(want arrow.DataType, d arrow.ArrayData) arrow.ArrayData {
	var children []arrow.ArrayData
	switch w := want.(type) {
	case *arrow.StructType:
		for i, c := range d.Children() {
			children = append(children, relabel(w.Field(i).Type, c))
		}
	case *arrow.MapType:
		children = []arrow.ArrayData{relabel(w.Elem(), d.Children()[0])}
	case arrow.ListLikeType:
		children = []arrow.ArrayData{relabel(w.Elem(), d.Children()[0])}
	}
	out := array.NewData(want, d.Len(), d.Buffers(), children, d.NullN(), d.Offset())
	for _, c := range children {
		c.Release()
	}
	return out
}

// checkNulls refuses a null where the field does not allow one: in a
// non-nullable column, or in a non-nullable nested field under a parent
// value that is not null. Rows are counted from base.
func checkNulls(f arrow.Field, arr arrow.Array, base int64, path string) error {
	return nullsWhere(f, arr, path, func(i int) int64 { return base + int64(i) }, nil)
}

// nullsWhere checks arr, whose element i belongs to top-level row row(i);
// live, when not nil, says which elements are inside a non-null parent.
func nullsWhere(f arrow.Field, arr arrow.Array, path string, row func(int) int64, live func(int) bool) error {
	if !f.Nullable && arr.NullN() > 0 {
		for i := range arr.Len() {
			if arr.IsNull(i) && (live == nil || live(i)) {
				return &InputError{Row: row(i), Column: path, Want: f.Type.String(),
					Reason: "null in a non-nullable field"}
			}
		}
	}
	valid := func(i int) bool { return arr.IsValid(i) && (live == nil || live(i)) }
	switch a := arr.(type) {
	case *array.Struct:
		st := f.Type.(*arrow.StructType)
		for j := range a.NumField() {
			cf := st.Field(j)
			if err := nullsWhere(cf, a.Field(j), path+"."+cf.Name, row, valid); err != nil {
				return err
			}
		}
	case array.ListLike:
		var elem arrow.Field
		switch t := f.Type.(type) {
		case *arrow.MapType:
			elem = arrow.Field{Name: "entries", Type: t.Elem()}
		case arrow.ListLikeType:
			elem = t.ElemField()
		}
		values := a.ListValues()
		// owner[k]: the list element that value k belongs to, or -1.
		owner := make([]int32, values.Len())
		for k := range owner {
			owner[k] = -1
		}
		for i := range a.Len() {
			if !valid(i) {
				continue
			}
			lo, hi := a.ValueOffsets(i)
			for k := lo; k < hi; k++ {
				owner[k] = int32(i)
			}
		}
		sub := path + "[]"
		if _, ok := f.Type.(*arrow.MapType); ok {
			sub = path
		}
		return nullsWhere(elem, values, sub,
			func(k int) int64 { return row(int(owner[k])) },
			func(k int) bool { return owner[k] >= 0 })
	}
	return nil
}

// AdaptRead gives a column read back from a fragment the table's type:
// Parquet readers may name list elements differently, or widen a
// timestamp unit; the values are the ones written.
func AdaptRead(mem memory.Allocator, want arrow.DataType, arr arrow.Array) (arrow.Array, error) {
	out, err := adapt(mem, want, arr, "")
	if err != nil {
		return nil, fmt.Errorf("table: column of type %s read back as %s: %w", want, arr.DataType(), err)
	}
	return out, nil
}
