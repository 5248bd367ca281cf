package server_test

import (
	"archive/zip"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stratadb/strata/api"
	"github.com/stratadb/strata/harness/rollouts"
	"github.com/stratadb/strata/harness/testenv"
	"github.com/stratadb/strata/server"
)

// npyArray is one .npy entry as a reader of the format sees it.
type npyArray struct {
	descr string
	n     int
	data  []byte
}

// readNPZ reads format=npz the way numpy.load does: a zip of .npy
// entries, each a format 1.0 header (a Python dict) and the data.
func readNPZ(t *testing.T, body string) map[string]npyArray {
	t.Helper()
	zr, err := zip.NewReader(strings.NewReader(body), int64(len(body)))
	if err != nil {
		t.Fatalf("not a zip: %v", err)
	}
	header := regexp.MustCompile(`^\{'descr': '([^']+)', 'fortran_order': False, 'shape': \((\d+),\), \} *\n$`)
	out := map[string]npyArray{}
	for _, zf := range zr.File {
		rc, err := zf.Open()
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		if _, err := buf.ReadFrom(rc); err != nil {
			t.Fatalf("%s: %v", zf.Name, err)
		}
		b := buf.Bytes()
		if !bytes.HasPrefix(b, []byte("\x93NUMPY\x01\x00")) {
			t.Fatalf("%s: not a .npy", zf.Name)
		}
		hl := int(binary.LittleEndian.Uint16(b[8:]))
		if (10+hl)%64 != 0 {
			t.Errorf("%s: data starts at %d, not a multiple of 64", zf.Name, 10+hl)
		}
		m := header.FindStringSubmatch(string(b[10 : 10+hl]))
		if m == nil {
			t.Fatalf("%s: header %q", zf.Name, b[10:10+hl])
		}
		n, _ := strconv.Atoi(m[2])
		out[strings.TrimSuffix(zf.Name, ".npy")] = npyArray{descr: m[1], n: n, data: b[10+hl:]}
	}
	return out
}

// Rows come as NumPy arrays with format=npz: the column names, then the
// values of each column in chunks, with a mask where a chunk has nulls,
// strings and binary as bytes and offsets; a column NumPy cannot hold is
// refused before the answer begins. A slice of a fragment reads only its
// rows.
func TestRowsAsNPZ(t *testing.T) {
	f := start(t, "file://"+t.TempDir(), server.Options{})
	if code, body := raw(t, f, "PUT", "/api/v1/tables/t", "application/json",
		`{"fields":[{"name":"id","type":"int64"},{"name":"r","type":"float32","nullable":true},{"name":"ok","type":"bool","nullable":true},`+
			`{"name":"note","type":"string","nullable":true},{"name":"blob","type":"binary","nullable":true},{"name":"at","type":"timestamp_us","nullable":true},{"name":"d","type":"date32","nullable":true}]}`, ""); code != http.StatusCreated {
		t.Fatalf("create: %d %s", code, body)
	}
	rows := `{"id":1,"r":1.5,"ok":true,"note":"héllo","blob":"AAE=","at":"2026-12-07T10:00:00Z","d":"2026-12-07"}` + "\n" +
		`{"id":2,"r":null,"ok":null,"note":null,"blob":null,"at":null,"d":null}` + "\n" +
		`{"id":3,"r":-2,"ok":false,"note":"","blob":"","at":"1970-01-01T00:00:01Z","d":"1970-01-02"}` + "\n"
	if code, body := raw(t, f, "POST", "/api/v1/tables/t/rows", "application/x-ndjson", rows, ""); code != http.StatusOK {
		t.Fatalf("append: %d %s", code, body)
	}
	h := http.Header{"Accept": {server.NPZ}}
	resp, body := send(t, f, "GET", "/api/v1/tables/t/rows?fresh=true", h, "")
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != server.NPZ {
		t.Fatalf("scan: %d %q %.200s", resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}
	got := readNPZ(t, body)
	le := binary.LittleEndian
	u64s := func(b []byte) (out []uint64) {
		for i := 0; i+8 <= len(b); i += 8 {
			out = append(out, le.Uint64(b[i:]))
		}
		return out
	}
	cols := got["columns"]
	if cols.descr != "<U4" || cols.n != 7 || len(cols.data) != 7*16 || le.Uint32(cols.data[16:]) != 'r' || le.Uint32(cols.data[20:]) != 0 {
		t.Fatalf("columns: %+v", cols)
	}
	want := map[string]string{ // name: descr, data in hex
		"0/0":         "<i8 010000000000000002000000000000000300000000000000",
		"0/1":         "<f4 0000c03f00000000000000c0",
		"0/1.mask":    "|b1 000100",
		"0/2":         "|b1 010000",
		"0/2.mask":    "|b1 000100",
		"0/3":         "|u1 68c3a96c6c6f",
		"0/3.offsets": "<i8 0000000000000000060000000000000006000000000000000600000000000000",
		"0/4":         "|u1 0001",
		"0/4.offsets": "<i8 0000000000000000020000000000000002000000000000000200000000000000",
		"0/5":         "<M8[us] 0028f049086206000000000000000000" + "40420f0000000000",
		"0/6":         "<M8[D] 3a510000000000000000000000000000" + "0100000000000000",
		"0/3.mask":    "|b1 000100",
		"0/4.mask":    "|b1 000100",
		"0/5.mask":    "|b1 000100",
		"0/6.mask":    "|b1 000100",
		"rows":        "<i8 0300000000000000",
	}
	for name, w := range want {
		a, ok := got[name]
		if !ok {
			t.Errorf("no entry %s", name)
			continue
		}
		if s := fmt.Sprintf("%s %x", a.descr, a.data); s != w {
			t.Errorf("%s: %s, want %s", name, s, w)
		}
	}
	if len(got) != len(want)+2 { // and columns and types
		t.Errorf("%d entries, want %d", len(got), len(want)+2)
	}
	if ty := got["types"]; ty.descr != "<U12" || ty.n != 7 || le.Uint32(ty.data[3*48:]) != 's' || le.Uint32(ty.data[4*48:]) != 'b' {
		t.Errorf("types: %+v", ty)
	}
	if off := u64s(got["0/3.offsets"].data); len(off) != 4 {
		t.Errorf("offsets %v", off)
	}

	// No rows: a chunk of none, each column's array of its type.
	got = readNPZ(t, func() string {
		_, body := send(t, f, "GET", "/api/v1/tables/t/rows?fresh=true&filter=id%3E9&columns=at,note", h, "")
		return body
	}())
	if got["rows"].n != 1 || got["0/0"].descr != "<M8[us]" || got["0/0"].n != 0 || got["0/1.offsets"].n != 1 || got["0/1"].n != 0 {
		t.Errorf("no rows: %+v", got)
	}
	// Only a scan answers npz: other answers of rows ignore the Accept.
	if resp, _ := send(t, f, "GET", "/api/v1/tables/t/changes?from=0", h, ""); resp.Header.Get("Content-Type") == server.NPZ {
		t.Error("changes answered npz")
	}

	// A column NumPy's arrays do not hold is refused before the answer.
	if code, body := raw(t, f, "PUT", "/api/v1/tables/nested", "application/json",
		`{"fields":[{"name":"id","type":"int64"},{"name":"tags","type":"list","items":{"type":"string"}}]}`, ""); code != http.StatusCreated {
		t.Fatalf("create: %d %s", code, body)
	}
	if code, body := raw(t, f, "GET", "/api/v1/tables/nested/rows?format=npz", "", "", ""); code != http.StatusBadRequest || !strings.Contains(body, `column \"tags\"`) {
		t.Fatalf("a list column as npz: %d %s", code, body)
	}
}

// GET …/fragments lists a version's fragments, and slices of them
// (fragment=, offsets=) read, together, every row of that version once,
// while later appends change nothing of it; a fragment the version does
// not hold, bad offsets, or a slice of rows not merged yet are refused.
func TestSlicesOfAVersionReadEachRowOnce(t *testing.T) {
	f := start(t, "file://"+t.TempDir(), server.Options{})
	if _, err := f.c.CreateTable(ctx, "t", rollouts.Schema); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		rec := rollouts.Batch(testenv.Allocator(t), 42, 0, int64(i*5000), 5000)
		if _, err := f.c.Append(ctx, "t", rec); err != nil {
			t.Fatal(err)
		}
		rec.Release()
		if err := f.c.CheckpointLSM(ctx, "t"); err != nil {
			t.Fatal(err)
		}
	}
	code, body := raw(t, f, "GET", "/api/v1/tables/t/fragments", "", "", "")
	var list api.FragmentList
	if code != http.StatusOK || json.Unmarshal([]byte(body), &list) != nil || len(list.Fragments) != 3 {
		t.Fatalf("fragments: %d %s", code, body)
	}
	rec := rollouts.Batch(testenv.Allocator(t), 42, 1, 100_000, 10)
	if _, err := f.c.Append(ctx, "t", rec); err != nil {
		t.Fatal(err)
	}
	rec.Release()
	if err := f.c.CheckpointLSM(ctx, "t"); err != nil {
		t.Fatal(err)
	}
	ids := func(q string) []string {
		code, body := raw(t, f, "GET", "/api/v1/tables/t/rows?format=csv&columns=id&"+q, "", "", "")
		if code != http.StatusOK {
			t.Fatalf("%s: %d %s", q, code, body)
		}
		return strings.Split(strings.TrimSpace(body), "\n")[1:]
	}
	want := ids(fmt.Sprintf("version=%d", list.Version))
	var got []string
	for _, fr := range list.Fragments {
		for lo := int64(0); lo < fr.Rows; lo += 1500 {
			got = append(got, ids(fmt.Sprintf("version=%d&fragment=%d&offsets=%d:%d", list.Version, fr.ID, lo, lo+1500))...)
		}
	}
	if len(want) != 15_000 || !slices.Equal(got, want) {
		t.Fatalf("slices read %d rows, the version %d", len(got), len(want))
	}
	for q, says := range map[string]string{
		fmt.Sprintf("version=%d&fragment=999", list.Version): "no fragment 999",
		"fragment=1&offsets=5:2":                             "want LO:HI",
		"fragment=1&offsets=5":                               "want LO:HI",
		"offsets=0:5":                                        "needs fragment=",
		"fragment=1&fresh=true":                              "not with fresh=true",
		"fragment=x":                                         "want an integer",
	} {
		if code, body := raw(t, f, "GET", "/api/v1/tables/t/rows?"+q, "", "", ""); code != http.StatusBadRequest || !strings.Contains(body, says) {
			t.Errorf("%s: %d %s; want 400 saying %q", q, code, body, says)
		}
	}
	if code, body := raw(t, f, "GET", "/api/v1/tables/t/count?fragment=1", "", "", ""); code != http.StatusBadRequest {
		t.Errorf("a count of a slice: %d %s", code, body)
	}
}
