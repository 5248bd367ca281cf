package api

import (
	"fmt"
	"sort"

	"github.com/apache/arrow-go/v18/arrow"
)

// Schema is the JSON form of a schema, for clients without Arrow:
// {"fields": [{"name": "id", "type": "int64"}, …]}.
type Schema struct {
	Fields []Field `json:"fields"`
}

// Field is one column. Scalar types: bool, int8, int16, int32, int64,
// uint8, uint16, uint32, uint64, float32, float64, string, large_string,
// binary, large_binary, date32, timestamp_s, timestamp_ms, timestamp_us,
// timestamp_ns (all UTC), time64_us. Nested types: "list" (and
// "large_list") with "items", a field without a name; "struct" with
// "fields"; "map" with "key" (never null) and "value".
type Field struct {
	Name     string  `json:"name,omitempty"`
	Type     string  `json:"type"`
	Nullable bool    `json:"nullable,omitempty"`
	Fields   []Field `json:"fields,omitempty"`
	Items    *Field  `json:"items,omitempty"`
	Key      *Field  `json:"key,omitempty"`
	Value    *Field  `json:"value,omitempty"`
}

var typesByName = map[string]arrow.DataType{
	"bool": arrow.FixedWidthTypes.Boolean, "int8": arrow.PrimitiveTypes.Int8, "int16": arrow.PrimitiveTypes.Int16,
	"int32": arrow.PrimitiveTypes.Int32, "int64": arrow.PrimitiveTypes.Int64, "uint8": arrow.PrimitiveTypes.Uint8,
	"uint16": arrow.PrimitiveTypes.Uint16, "uint32": arrow.PrimitiveTypes.Uint32, "uint64": arrow.PrimitiveTypes.Uint64,
	"float32": arrow.PrimitiveTypes.Float32, "float64": arrow.PrimitiveTypes.Float64, "string": arrow.BinaryTypes.String,
	"large_string": arrow.BinaryTypes.LargeString, "binary": arrow.BinaryTypes.Binary, "large_binary": arrow.BinaryTypes.LargeBinary,
	"date32":       arrow.FixedWidthTypes.Date32,
	"timestamp_s":  &arrow.TimestampType{Unit: arrow.Second, TimeZone: "UTC"},
	"timestamp_ms": &arrow.TimestampType{Unit: arrow.Millisecond, TimeZone: "UTC"},
	"timestamp_us": &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"},
	"timestamp_ns": &arrow.TimestampType{Unit: arrow.Nanosecond, TimeZone: "UTC"},
	"time64_us":    arrow.FixedWidthTypes.Time64us,
}

func typeNames() []string {
	names := []string{"list", "large_list", "struct", "map"}
	for n := range typesByName {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// ToArrow converts the JSON form. Names are checked when the table is
// created (evolve.CheckStorable).
func (s Schema) ToArrow() (*arrow.Schema, error) {
	fields := make([]arrow.Field, len(s.Fields))
	for i, f := range s.Fields {
		af, err := f.toArrow(fmt.Sprintf("field %d (%q)", i, f.Name), 0)
		if err != nil {
			return nil, err
		}
		fields[i] = af
	}
	return arrow.NewSchema(fields, nil), nil
}

func (f Field) toArrow(where string, depth int) (arrow.Field, error) {
	if depth > 32 {
		return arrow.Field{}, fmt.Errorf("%s: nested too deep", where)
	}
	need := func(sub *Field, what string) (arrow.Field, error) {
		if sub == nil {
			return arrow.Field{}, fmt.Errorf("%s: a %s needs %q", where, f.Type, what)
		}
		return sub.toArrow(where+"."+what, depth+1)
	}
	out := arrow.Field{Name: f.Name, Nullable: f.Nullable}
	switch f.Type {
	case "list", "large_list":
		item, err := need(f.Items, "items")
		if err != nil {
			return out, err
		}
		item.Name = "item"
		if f.Type == "list" {
			out.Type = arrow.ListOfField(item)
		} else {
			out.Type = arrow.LargeListOfField(item)
		}
	case "struct":
		children := make([]arrow.Field, len(f.Fields))
		for i, c := range f.Fields {
			cf, err := c.toArrow(fmt.Sprintf("%s.%s", where, c.Name), depth+1)
			if err != nil {
				return out, err
			}
			children[i] = cf
		}
		out.Type = arrow.StructOf(children...)
	case "map":
		k, err := need(f.Key, "key")
		if err != nil {
			return out, err
		}
		v, err := need(f.Value, "value")
		if err != nil {
			return out, err
		}
		m := arrow.MapOf(k.Type, v.Type)
		m.SetItemNullable(v.Nullable)
		out.Type = m
	default:
		t, ok := typesByName[f.Type]
		if !ok {
			return out, fmt.Errorf("%s: unknown type %q; want one of %v", where, f.Type, typeNames())
		}
		out.Type = t
	}
	return out, nil
}

// SchemaOf gives the JSON form of a schema (types outside the list keep
// Arrow's own name).
func SchemaOf(s *arrow.Schema) Schema {
	var out Schema
	for _, f := range s.Fields() {
		out.Fields = append(out.Fields, fieldOf(f))
	}
	return out
}

func fieldOf(f arrow.Field) Field {
	out := Field{Name: f.Name, Nullable: f.Nullable, Type: f.Type.String()}
	for n, t := range typesByName {
		if arrow.TypeEqual(t, f.Type) {
			out.Type = n
			return out
		}
	}
	switch t := f.Type.(type) {
	case *arrow.MapType:
		k, v := fieldOf(t.KeyField()), fieldOf(t.ItemField())
		k.Name, v.Name = "", ""
		out.Type, out.Key, out.Value = "map", &k, &v
	case *arrow.ListType:
		item := fieldOf(t.ElemField())
		item.Name = ""
		out.Type, out.Items = "list", &item
	case *arrow.LargeListType:
		item := fieldOf(t.ElemField())
		item.Name = ""
		out.Type, out.Items = "large_list", &item
	case *arrow.StructType:
		out.Type = "struct"
		for _, c := range t.Fields() {
			out.Fields = append(out.Fields, fieldOf(c))
		}
	}
	return out
}

// AlterRequest is the body of POST /api/v1/tables/{name}/schema: column
// changes, applied in order as one schema change.
type AlterRequest struct {
	Changes []SchemaChange `json:"changes"`
}

// SchemaChange is one column change: {"op": "add", "column": "grade",
// "type": "string"}; {"op": "rename", "column": "reward", "to": "score"};
// {"op": "drop", "column": "note"}; {"op": "widen", "column": "score",
// "type": "float64"} or {"op": "widen", "column": "id", "nullable": true};
// or the table's cluster key, {"op": "cluster_by", "columns": ["run",
// "step"]} ("columns": [] clears it; a missing "columns" is refused, so
// in Go an empty, non-nil Columns clears it). Types are the scalar types
// of Field.
type SchemaChange struct {
	Op       string   `json:"op"`
	Column   string   `json:"column,omitempty"`
	To       string   `json:"to,omitempty"`
	Type     string   `json:"type,omitempty"`
	Nullable bool     `json:"nullable,omitempty"`
	Columns  []string `json:"columns,omitzero"`
}

// ArrowType is the change's type (nil when it names none).
func (c SchemaChange) ArrowType() (arrow.DataType, error) {
	if c.Type == "" {
		return nil, nil
	}
	t, ok := typesByName[c.Type]
	if !ok {
		return nil, fmt.Errorf("column %q: unknown type %q; want one of the scalar types %v", c.Column, c.Type, scalarTypeNames())
	}
	return t, nil
}

func scalarTypeNames() []string {
	var names []string
	for n := range typesByName {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}
