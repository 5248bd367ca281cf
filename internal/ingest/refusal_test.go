package ingest_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/stratadb/strata/internal/ingest"
	"github.com/stratadb/strata/table/evolve"
)

// No refusal of a value says what a Go library said: every bad value of
// every scalar type, in CSV and in JSON lines, is refused naming the line
// it is on, the column, and what the column takes, without strconv's,
// encoding/json's or reflect's words.
func TestRefusalsSayWhatTheColumnTakesInItsOwnWords(t *testing.T) {
	types := []arrow.DataType{
		arrow.PrimitiveTypes.Int8, arrow.PrimitiveTypes.Int16, arrow.PrimitiveTypes.Int32, arrow.PrimitiveTypes.Int64,
		arrow.PrimitiveTypes.Uint8, arrow.PrimitiveTypes.Uint16, arrow.PrimitiveTypes.Uint32, arrow.PrimitiveTypes.Uint64,
		arrow.PrimitiveTypes.Float32, arrow.PrimitiveTypes.Float64, arrow.FixedWidthTypes.Boolean,
		arrow.BinaryTypes.Binary, arrow.FixedWidthTypes.Timestamp_us, arrow.FixedWidthTypes.Timestamp_ms,
		arrow.FixedWidthTypes.Date32, arrow.FixedWidthTypes.Time64us,
	}
	csvValues := []string{"abc", "1.5", "-1", "99999999999999999999999", "maybe", "2026-13-45", "12:61:00", "@@"}
	jsonValues := []string{`"abc"`, `1.5`, `-1`, `1e400`, `99999999999999999999999`, `true`, `{}`, `[1]`, `seven`, `"2026-13-45"`, `"@@"`}
	banned := []string{"strconv", "json: cannot", "Go value", "reflect", "ParseInt", "ParseFloat", "ParseBool", "invalid syntax"}
	refusals := 0
	check := func(kind string, typ arrow.DataType, v string, err error) {
		t.Helper()
		if err == nil {
			return
		}
		refusals++
		msg := err.Error()
		for _, b := range banned {
			if strings.Contains(msg, b) {
				t.Errorf("%s %s %s: %q says %q", kind, typ, v, msg, b)
			}
		}
		var ie *evolve.InputError
		if !errors.As(err, &ie) || !strings.Contains(msg, kind+" line 2") && !strings.Contains(msg, kind+" line 1") || !strings.Contains(msg, `column "x"`) {
			t.Errorf("%s %s %s: %q names no line or column", kind, typ, v, msg)
		}
	}
	for _, typ := range types {
		schema := arrow.NewSchema([]arrow.Field{{Name: "x", Type: typ, Nullable: true}}, nil)
		for _, v := range csvValues {
			recs, err := ingest.ReadCSV(strings.NewReader("x\n"+v+"\n"), schema, ingest.Options{})
			ingest.Release(recs)
			check("CSV", typ, v, err)
		}
		for _, v := range jsonValues {
			recs, err := ingest.ReadJSONLines(strings.NewReader(`{"x": `+v+"}\n"), schema, ingest.Options{})
			ingest.Release(recs)
			check("JSON", typ, v, err)
		}
	}
	if refusals < 150 {
		t.Fatalf("only %d of the bad values were refused", refusals)
	}
}
