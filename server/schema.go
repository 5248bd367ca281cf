package server

import (
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
)

// SchemaJSON is the JSON form of a schema, for clients without Arrow:
// {"fields": [{"name": "id", "type": "int64"}, …]}.
type SchemaJSON struct {
	Fields []FieldJSON `json:"fields"`
}

// FieldJSON is one column. Types: bool, int8, int16, int32, int64, uint8,
// uint16, uint32, uint64, float32, float64, string, binary, timestamp_us
// (UTC), date32.
type FieldJSON struct {
	Name     string `json:"name"`
	Type     string `json:"type"`
	Nullable bool   `json:"nullable,omitempty"`
}

var typesByName = map[string]arrow.DataType{
	"bool": arrow.FixedWidthTypes.Boolean, "int8": arrow.PrimitiveTypes.Int8, "int16": arrow.PrimitiveTypes.Int16,
	"int32": arrow.PrimitiveTypes.Int32, "int64": arrow.PrimitiveTypes.Int64, "uint8": arrow.PrimitiveTypes.Uint8,
	"uint16": arrow.PrimitiveTypes.Uint16, "uint32": arrow.PrimitiveTypes.Uint32, "uint64": arrow.PrimitiveTypes.Uint64,
	"float32": arrow.PrimitiveTypes.Float32, "float64": arrow.PrimitiveTypes.Float64, "string": arrow.BinaryTypes.String,
	"binary": arrow.BinaryTypes.Binary, "timestamp_us": &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"},
	"date32": arrow.FixedWidthTypes.Date32,
}

// ToArrow converts the JSON form.
func (s SchemaJSON) ToArrow() (*arrow.Schema, error) {
	if len(s.Fields) == 0 {
		return nil, fmt.Errorf("a schema needs at least one field")
	}
	fields := make([]arrow.Field, len(s.Fields))
	seen := map[string]bool{}
	for i, f := range s.Fields {
		t, ok := typesByName[f.Type]
		if !ok || f.Name == "" || seen[f.Name] {
			return nil, fmt.Errorf("field %d (%q, %q): want a unique name and one of the known types", i, f.Name, f.Type)
		}
		seen[f.Name] = true
		fields[i] = arrow.Field{Name: f.Name, Type: t, Nullable: f.Nullable}
	}
	return arrow.NewSchema(fields, nil), nil
}

// FromArrow gives the JSON form of a schema (types outside the list keep
// Arrow's own name).
func FromArrow(s *arrow.Schema) SchemaJSON {
	var out SchemaJSON
	for _, f := range s.Fields() {
		name := f.Type.String()
		for n, t := range typesByName {
			if arrow.TypeEqual(t, f.Type) {
				name = n
			}
		}
		out.Fields = append(out.Fields, FieldJSON{Name: f.Name, Type: name, Nullable: f.Nullable})
	}
	return out
}
