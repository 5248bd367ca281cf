package ingest_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"

	"github.com/stratadb/strata/harness/testenv"
	"github.com/stratadb/strata/internal/ingest"
	"github.com/stratadb/strata/table/evolve"
)

var schema = arrow.NewSchema([]arrow.Field{
	{Name: "id", Type: arrow.PrimitiveTypes.Int64},
	{Name: "msg", Type: arrow.BinaryTypes.String, Nullable: true},
	{Name: "meta", Type: arrow.StructOf(
		arrow.Field{Name: "a", Type: arrow.PrimitiveTypes.Int32, Nullable: true},
		arrow.Field{Name: "b", Type: arrow.PrimitiveTypes.Int32, Nullable: true},
		arrow.Field{Name: "c", Type: arrow.PrimitiveTypes.Int32, Nullable: true},
		arrow.Field{Name: "d", Type: arrow.PrimitiveTypes.Int32, Nullable: true},
		arrow.Field{Name: "e", Type: arrow.PrimitiveTypes.Int32, Nullable: true},
		arrow.Field{Name: "f", Type: arrow.PrimitiveTypes.Int32, Nullable: true},
		arrow.Field{Name: "g", Type: arrow.PrimitiveTypes.Int32, Nullable: true},
	), Nullable: true},
}, nil)

func batch(t testing.TB, rows int) arrow.RecordBatch {
	t.Helper()
	b := array.NewRecordBuilder(testenv.Arrow, schema)
	defer b.Release()
	for i := range rows {
		b.Field(0).(*array.Int64Builder).Append(int64(i))
		b.Field(1).(*array.StringBuilder).Append(strings.Repeat("x", i%5))
		sb := b.Field(2).(*array.StructBuilder)
		sb.Append(true)
		for f := range 7 {
			sb.FieldBuilder(f).(*array.Int32Builder).Append(int32(i * f))
		}
	}
	return b.NewRecordBatch()
}

// stream encodes batches as an Arrow IPC stream.
func stream(t testing.TB, s *arrow.Schema, opts []ipc.Option, recs ...arrow.RecordBatch) []byte {
	t.Helper()
	var buf bytes.Buffer
	w := ipc.NewWriter(&buf, append([]ipc.Option{ipc.WithSchema(s)}, opts...)...)
	for _, r := range recs {
		if err := w.Write(r); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// messages returns the offsets of each message's metadata and body in an
// IPC stream.
func messages(data []byte) (metas, bodies [][2]int) {
	pos := 0
	for pos+8 <= len(data) {
		if binary.LittleEndian.Uint32(data[pos:]) != 0xFFFFFFFF {
			break
		}
		n := int(binary.LittleEndian.Uint32(data[pos+4:]))
		if n == 0 {
			break
		}
		meta := [2]int{pos + 8, pos + 8 + n}
		// The body length is the Message table's field 3; read it the
		// cheap way: the reader will tell us through the guard anyway, so
		// here just find the next continuation marker.
		next := meta[1]
		for next+4 <= len(data) && binary.LittleEndian.Uint32(data[next:]) != 0xFFFFFFFF {
			next += 8
		}
		metas = append(metas, meta)
		bodies = append(bodies, [2]int{meta[1], next})
		pos = next
	}
	return metas, bodies
}

func TestReadIPCRoundTrip(t *testing.T) {
	rec := batch(t, 10)
	defer rec.Release()
	for _, opts := range [][]ipc.Option{nil, {ipc.WithLZ4()}, {ipc.WithZstd()}} {
		s, recs, err := ingest.ReadIPC(bytes.NewReader(stream(t, schema, opts, rec, rec)), schema, ingest.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if !s.Equal(schema) || ingest.Rows(recs) != 20 || !array.RecordEqual(recs[0], rec) {
			t.Fatalf("read back %s, %d rows", s, ingest.Rows(recs))
		}
		ingest.Release(recs)
	}
}

// Every word of every message, set to a huge value, must give a clean
// error or valid batches: never a panic, never an allocation the input
// declared without having the bytes for it (which would end the process).
func TestReadIPCSurvivesEveryTamperedWord(t *testing.T) {
	rec := batch(t, 20)
	defer rec.Release()
	for _, opts := range [][]ipc.Option{nil, {ipc.WithLZ4()}} {
		good := stream(t, schema, opts, rec)
		refused := 0
		for at := 0; at+4 <= len(good); at += 4 {
			for _, v := range []uint64{0x7FFFFFFF, 0xFFFFFFFF, 1 << 40, 1<<63 - 1} {
				data := bytes.Clone(good)
				if v > 0xFFFFFFFF {
					if at+8 > len(data) {
						continue
					}
					binary.LittleEndian.PutUint64(data[at:], v)
				} else {
					binary.LittleEndian.PutUint32(data[at:], uint32(v))
				}
				_, recs, err := ingest.ReadIPC(bytes.NewReader(data), schema, ingest.Options{Limit: 1 << 20})
				if err != nil {
					refused++
					var ie *evolve.InputError
					if !errors.As(err, &ie) && !errors.Is(err, ingest.ErrTooLarge) {
						t.Fatalf("word at %d = %#x: error %v is neither bad input nor too large", at, v, err)
					}
					continue
				}
				ingest.Release(recs)
			}
		}
		if refused == 0 {
			t.Fatal("no tampered stream was refused")
		}
	}
}

func TestReadIPCLimits(t *testing.T) {
	rec := batch(t, 1000)
	defer rec.Release()
	// A compressed buffer that declares a terabyte once decompressed.
	data := stream(t, schema, []ipc.Option{ipc.WithLZ4()}, rec)
	_, bodies := messages(data)
	body := bodies[1]
	binary.LittleEndian.PutUint64(data[body[0]:], 1<<40)
	if _, _, err := ingest.ReadIPC(bytes.NewReader(data), schema, ingest.Options{Limit: 1 << 20}); !errors.Is(err, ingest.ErrTooLarge) {
		t.Fatalf("decompression bomb: %v", err)
	}
	// A stream longer than the limit.
	big := stream(t, schema, nil, rec, rec, rec)
	if _, _, err := ingest.ReadIPC(bytes.NewReader(big), schema, ingest.Options{Limit: int64(len(big) / 2)}); !errors.Is(err, ingest.ErrTooLarge) {
		t.Fatalf("stream over the limit: %v", err)
	}
	// A struct whose child count says billions: every 7 in the schema
	// message set to 2^31-1, one at a time.
	data = stream(t, schema, nil, rec)
	metas, _ := messages(data)
	tried := 0
	for at := metas[0][0]; at+4 <= metas[0][1]; at += 4 {
		if binary.LittleEndian.Uint32(data[at:]) != 7 {
			continue
		}
		tampered := bytes.Clone(data)
		binary.LittleEndian.PutUint32(tampered[at:], 0x7FFFFFFF)
		tried++
		if _, _, err := ingest.ReadIPC(bytes.NewReader(tampered), schema, ingest.Options{}); err == nil {
			t.Fatalf("child count tampered at %d: accepted", at)
		}
	}
	if tried == 0 {
		t.Fatal("found no child count to tamper with")
	}
}

func TestJSONLines(t *testing.T) {
	s := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "msg", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "tags", Type: arrow.ListOf(arrow.BinaryTypes.String), Nullable: true},
		{Name: "attrs", Type: arrow.MapOf(arrow.BinaryTypes.String, arrow.PrimitiveTypes.Float64), Nullable: true},
	}, nil)
	good := `{"id": 1, "msg": "a", "tags": ["x", "y"], "attrs": [{"key": "k", "value": 1.5}]}
{"id": 2}

{"msg": null, "id": 3, "tags": null}
`
	recs, err := ingest.ReadJSONLines(strings.NewReader(good), s, ingest.Options{ChunkRows: 2})
	if err != nil {
		t.Fatal(err)
	}
	if ingest.Rows(recs) != 3 || len(recs) != 2 {
		t.Fatalf("%d rows in %d batches", ingest.Rows(recs), len(recs))
	}
	if v := recs[0].Column(2).(*array.List).ListValues().(*array.String).Value(1); v != "y" {
		t.Fatalf("tags[1] = %q", v)
	}
	ingest.Release(recs)
	bad := []struct {
		name, in string
		row      int64
		column   string
	}{
		{"a null in a non-nullable column", `{"id": 1}` + "\n" + `{"id": null}`, 1, "id"},
		{"a missing non-nullable column", `{"id": 1}` + "\n" + `{"msg": "x"}`, 1, "id"},
		{"an unknown key", `{"id": 1, "mgs": "typo"}`, 0, "mgs"},
		{"a key twice", `{"id": 1, "id": 2}`, 0, "id"},
		{"a fraction in an integer", `{"id": 1.5}`, 0, "id"},
		{"an integer out of range", `{"id": 99999999999999999999}`, 0, "id"},
		{"an object for an integer", `{"id": {"x": 1}}`, 0, "id"},
		{"two values on a line", `{"id": 1} {"id": 2}`, 0, ""},
		{"not an object", `[1, 2]`, 0, ""},
		{"a good line then a bad one", `{"id": 1}` + "\n" + `{"id": "x"}`, 1, "id"},
		// A JSON decoder turns these into U+FFFD: the row would not be the
		// one sent.
		{"bytes that are not UTF-8", "{\"id\": 1, \"msg\": \"a\xffb\"}", 0, ""},
		{"a cut UTF-8 sequence", "{\"id\": 1}\n{\"id\": 2, \"msg\": \"\xc3\"}", 1, ""},
		{"a lone high surrogate", `{"id": 1, "msg": "a\ud800b"}`, 0, ""},
		{"a high surrogate at the end of a string", `{"id": 1, "msg": "a\ud800"}`, 0, ""},
		{"a high surrogate before another high one", `{"id": 1, "msg": "\ud800\ud800"}`, 0, ""},
		{"a lone low surrogate", `{"id": 1, "tags": ["x", "\udc00"]}`, 0, ""},
		{"a lone surrogate in a map key", `{"id": 1, "attrs": {"\uDBFF": 1}}`, 0, ""},
	}
	for _, c := range bad {
		recs, err := ingest.ReadJSONLines(strings.NewReader(c.in), s, ingest.Options{})
		var ie *evolve.InputError
		if !errors.As(err, &ie) || recs != nil {
			t.Errorf("%s: %v (%d batches)", c.name, err, len(recs))
			continue
		}
		if ie.Row != c.row || ie.Column != c.column {
			t.Errorf("%s: %v: row %d column %q, want row %d column %q", c.name, err, ie.Row, ie.Column, c.row, c.column)
		}
	}
	// Text that is Unicode passes as it is: a surrogate pair, an escaped
	// backslash before a "u", U+FFFD itself, and UTF-8 of every length.
	text := `{"id": 1, "msg": "\ud83d\ude00 \\ud800 \ufffd \uFFFD é€😀 \u00e9"}`
	recs, err = ingest.ReadJSONLines(strings.NewReader(text), s, ingest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if v := recs[0].Column(1).(*array.String).Value(0); v != "😀 \\ud800 \ufffd \ufffd é€😀 é" {
		t.Fatalf("msg = %q", v)
	}
	ingest.Release(recs)
	recs, err = ingest.ReadJSONLines(strings.NewReader(`{"id": 1, "mgs": "typo"}`), s, ingest.Options{IgnoreUnknown: true})
	if err != nil || ingest.Rows(recs) != 1 {
		t.Fatalf("ignoring unknown keys: %v", err)
	}
	ingest.Release(recs)
	if _, err := ingest.ReadJSONLines(strings.NewReader(strings.Repeat(`{"id": 1}`+"\n", 1000)), s, ingest.Options{Limit: 100}); !errors.Is(err, ingest.ErrTooLarge) {
		t.Fatalf("over the limit: %v", err)
	}
}

func TestCSV(t *testing.T) {
	s := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "msg", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "score", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
	}, nil)
	recs, err := ingest.ReadCSV(strings.NewReader("msg,id\nhello,1\n,2\n"), s, ingest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if ingest.Rows(recs) != 2 || !recs[0].Column(1).IsNull(1) || !recs[0].Column(2).IsNull(0) {
		t.Fatalf("read %v", recs)
	}
	ingest.Release(recs)
	bad := []struct {
		name, in string
		row      int64
		column   string
	}{
		{"an empty non-nullable field", "id,msg\n1,a\n,b\n", 1, "id"},
		{"a value that does not parse", "id\n1\nx\n", 1, "id"},
		{"an unknown column", "id,mgs\n1,a\n", -1, "mgs"},
		{"a column twice", "id,id\n1,1\n", -1, "id"},
		{"a short row", "id,msg\n1,a\n2\n", 1, ""},
	}
	for _, c := range bad {
		recs, err := ingest.ReadCSV(strings.NewReader(c.in), s, ingest.Options{})
		var ie *evolve.InputError
		if !errors.As(err, &ie) || recs != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if ie.Row != c.row || ie.Column != c.column {
			t.Errorf("%s: %v: row %d column %q, want row %d column %q", c.name, err, ie.Row, ie.Column, c.row, c.column)
		}
	}
}

// cleanOrConforming fails unless err is bad input or too large, or else
// every batch of recs (which it releases) passes Conform against s.
func cleanOrConforming(t *testing.T, s *arrow.Schema, recs []arrow.RecordBatch, err error) {
	t.Helper()
	if err != nil {
		var ie *evolve.InputError
		if !errors.As(err, &ie) && !errors.Is(err, ingest.ErrTooLarge) {
			t.Fatalf("error %v is neither bad input nor too large", err)
		}
		return
	}
	defer ingest.Release(recs)
	for _, r := range recs {
		c, err := evolve.Conform(s, r, evolve.ConformOptions{})
		if err != nil {
			t.Fatalf("a returned batch does not conform: %v", err)
		}
		c.Release()
	}
}

// FuzzReadIPC: any bytes give a clean error or batches that pass Conform,
// never a panic or an allocation past the budget.
func FuzzReadIPC(f *testing.F) {
	rec := batch(f, 5)
	defer rec.Release()
	f.Add(stream(f, schema, nil, rec))
	f.Add(stream(f, schema, []ipc.Option{ipc.WithLZ4()}, rec, rec))
	f.Fuzz(func(t *testing.T, data []byte) {
		_, recs, err := ingest.ReadIPC(bytes.NewReader(data), schema, ingest.Options{Limit: 1 << 20})
		cleanOrConforming(t, schema, recs, err)
	})
}

// FuzzReadCSV: any text gives a clean error or batches that pass Conform,
// over a schema with a column of each kind CSV fills.
func FuzzReadCSV(f *testing.F) {
	s := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "msg", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "score", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
		{Name: "ok", Type: arrow.FixedWidthTypes.Boolean, Nullable: true},
		{Name: "ts", Type: &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}, Nullable: true},
		{Name: "day", Type: arrow.FixedWidthTypes.Date32, Nullable: true},
		{Name: "raw", Type: arrow.BinaryTypes.Binary, Nullable: true},
	}, nil)
	f.Add("id,msg,score\n1,hello,0.5\n2,,\n")
	f.Add("msg,id,ok,ts,day,raw\n\"a,b\",3,true,2024-01-02T03:04:05Z,2024-01-02,aGk=\n")
	f.Add("id\n9223372036854775807\n-9223372036854775808\n")
	f.Fuzz(func(t *testing.T, in string) {
		recs, err := ingest.ReadCSV(strings.NewReader(in), s, ingest.Options{Limit: 1 << 20, ChunkRows: 3})
		cleanOrConforming(t, s, recs, err)
	})
}

// NaN, Infinity and -Infinity, as Python's json module writes them, are
// taken in float columns — at the top, in lists and maps, in float32 —
// and refused in other columns with the column named; inside strings they
// are text; a word that only begins like one is not JSON.
func TestJSONLinesTakeNaNAndInfinityInFloatColumns(t *testing.T) {
	s := arrow.NewSchema([]arrow.Field{
		{Name: "reward", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
		{Name: "f32", Type: arrow.PrimitiveTypes.Float32, Nullable: true},
		{Name: "msg", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "xs", Type: arrow.ListOf(arrow.PrimitiveTypes.Float64), Nullable: true},
		{Name: "n", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
	}, nil)
	good := `{"reward": NaN, "f32": -Infinity, "msg": "NaN, Infinity", "xs": [Infinity, 1.5, NaN]}
{"reward":Infinity,"f32":NaN,"msg":"a \"NaN\" b"}
{"reward": -Infinity , "xs": [-Infinity]}
{"reward": 2.5, "n": 3}
`
	recs, err := ingest.ReadJSONLines(strings.NewReader(good), s, ingest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer ingest.Release(recs)
	rec := recs[0]
	r := rec.Column(0).(*array.Float64)
	f := rec.Column(1).(*array.Float32)
	if !math.IsNaN(r.Value(0)) || !math.IsInf(r.Value(1), 1) || !math.IsInf(r.Value(2), -1) || r.Value(3) != 2.5 {
		t.Errorf("reward: %v", r)
	}
	if !math.IsInf(float64(f.Value(0)), -1) || !math.IsNaN(float64(f.Value(1))) {
		t.Errorf("f32: %v", f)
	}
	if m := rec.Column(2).(*array.String); m.Value(0) != "NaN, Infinity" || m.Value(1) != `a "NaN" b` {
		t.Errorf("msg: %v", m)
	}
	xs := rec.Column(3).(*array.List).ListValues().(*array.Float64)
	if xs.Len() != 4 || !math.IsInf(xs.Value(0), 1) || xs.Value(1) != 1.5 || !math.IsNaN(xs.Value(2)) || !math.IsInf(xs.Value(3), -1) {
		t.Errorf("xs: %v", xs)
	}
	for _, bad := range []string{`{"n": NaN}`, `{"msg": Infinity}`, `{"reward": NaNa}`, `{"reward": Infinit}`, `{"reward": nan}`} {
		var ie *evolve.InputError
		if _, err := ingest.ReadJSONLines(strings.NewReader(bad), s, ingest.Options{}); !errors.As(err, &ie) {
			t.Errorf("%s: %v, want an input error", bad, err)
		} else if strings.Contains(bad, `"n"`) && (ie.Column != "n" || !strings.Contains(ie.Reason, "float")) {
			t.Errorf("%s: %v, want the column and that NaN is a float's", bad, err)
		}
	}
}

// A string of the input that begins with a NUL is the input's string,
// never taken for a NaN or refused as one, on a line with a bare NaN too.
func TestJSONLinesStringsStartingWithNULAreStrings(t *testing.T) {
	s := arrow.NewSchema([]arrow.Field{
		{Name: "f", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
		{Name: "g", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
		{Name: "s", Type: arrow.BinaryTypes.String, Nullable: true},
	}, nil)
	recs, err := ingest.ReadJSONLines(strings.NewReader(`{"f":NaN,"s":"\u0000abc"}`+"\n"+`{"f":NaN,"s":"\u0000NaN"}`+"\n"), s, ingest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer ingest.Release(recs)
	if v := recs[0].Column(2).(*array.String); v.Value(0) != "\x00abc" || v.Value(1) != "\x00NaN" {
		t.Fatalf("strings: %q %q", v.Value(0), v.Value(1))
	}
	if _, err := ingest.ReadJSONLines(strings.NewReader(`{"f":"\u0000hello","g":NaN}`+"\n"), s, ingest.Options{}); err == nil {
		t.Fatal(`"\u0000hello" was taken as a float`)
	}
}
