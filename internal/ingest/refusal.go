package ingest

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/goccy/go-json"

	"github.com/stratadb/strata/table/evolve"
)

// What a refused value says: the value as the input wrote it, the
// column's type, and the forms the column takes — never a decoder's own
// words (a Go library's error text means nothing to the user who sent
// the rows).

// refusedText is the reason a CSV field v does not fit a column of type
// t; cause is the decoder's error, read only for whether v was a number
// out of the type's range.
func refusedText(v string, t arrow.DataType, cause error) string {
	if cause != nil && strings.Contains(cause.Error(), "out of range") {
		return fmt.Sprintf("%q is out of the range of %s", truncate(v, 64), t)
	}
	return fmt.Sprintf("%q is not a valid %s: %s", truncate(v, 64), t, wantOf(t))
}

// refusedJSON is the reason a JSON value that the column's decoder
// refused with err does not fit a column of type t.
func refusedJSON(err error, t arrow.DataType) string {
	var te *json.UnmarshalTypeError
	var se *json.SyntaxError
	switch {
	case errors.As(err, &te) && te.Value != "":
		v := strconvQuote(strings.TrimPrefix(te.Value, "number "))
		switch te.Value {
		case "{", "object":
			v = "an object"
		case "[", "array":
			v = "a list"
		}
		return fmt.Sprintf("%s is not a valid %s: %s", v, t, wantOf(t))
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || strings.Contains(err.Error(), "unexpected end"):
		return "the line ends before the value does (not complete JSON)"
	case errors.As(err, &se):
		return fmt.Sprintf("the value is not JSON (text is written in double quotes: \"like this\"); the column takes %s", strings.TrimPrefix(wantOf(t), "want "))
	}
	return fmt.Sprintf("the value is not a valid %s: %s", t, wantOf(t))
}

// wantOf says what a column of type t takes, as an example.
func wantOf(t arrow.DataType) string {
	switch t.ID() {
	case arrow.INT8, arrow.INT16, arrow.INT32, arrow.INT64:
		return "want an integer such as 42 or -7"
	case arrow.UINT8, arrow.UINT16, arrow.UINT32, arrow.UINT64:
		return "want an integer from 0 up, such as 42"
	case arrow.FLOAT16, arrow.FLOAT32, arrow.FLOAT64:
		return "want a number such as 0.5, 42 or 1e-3 (NaN, Infinity and -Infinity too)"
	case arrow.DECIMAL32, arrow.DECIMAL64, arrow.DECIMAL128, arrow.DECIMAL256:
		return "want a decimal number such as 12.50"
	case arrow.BOOL:
		return "want true or false"
	case arrow.STRING, arrow.LARGE_STRING, arrow.STRING_VIEW:
		return "want text"
	case arrow.BINARY, arrow.LARGE_BINARY, arrow.BINARY_VIEW, arrow.FIXED_SIZE_BINARY:
		return "want bytes written in base64, such as aGVsbG8="
	case arrow.TIMESTAMP:
		return "want a time: 2026-12-07T10:00:00Z, 2026-12-07T10:00:00.250+01:00, 2026-12-07 10:00:00 (no zone: UTC) or 2026-12-07 (midnight), or an integer count of the column's units since 1970"
	case arrow.DATE32:
		return "want a date such as 2026-12-07, or an integer count of days since 1970-01-01"
	case arrow.DATE64:
		return "want a date such as 2026-12-07, or an integer count of milliseconds since 1970"
	case arrow.TIME32, arrow.TIME64:
		return "want a time of day such as 10:00:00 or 10:00:00.250"
	case arrow.DURATION:
		return "want an integer number of the column's units"
	}
	return "want a value of that type"
}

// atLine names the line of a text input (format "CSV" or "JSON") that an
// *evolve.InputError about a row is on: lines holds the line of each row
// from row base on. Other errors pass as they are.
func atLine(err error, format string, base int64, lines []int64) error {
	var ie *evolve.InputError
	if errors.As(err, &ie) && ie.Line == 0 && ie.Row >= base && ie.Row-base < int64(len(lines)) {
		ie.Line, ie.Format = lines[ie.Row-base], format
	}
	return err
}

// strconvQuote is v in double quotes, cut to 64 bytes.
func strconvQuote(v string) string { return fmt.Sprintf("%q", truncate(v, 64)) }

// jsonSyntax is what a JSON decoder's error says, without its package's
// prefix.
func jsonSyntax(err error) string {
	return strings.TrimPrefix(err.Error(), "json: ")
}
