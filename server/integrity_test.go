package server_test

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"

	"github.com/stratadb/strata/api"
	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/blob/fault"
	"github.com/stratadb/strata/client"
	"github.com/stratadb/strata/harness/testenv"
	"github.com/stratadb/strata/server"
	"github.com/stratadb/strata/table/format"
	"github.com/stratadb/strata/walshard"
	"github.com/stratadb/strata/walshard/wal"
)

// The defects of an append path that trusted its input, each as a client
// would send it. After every refusal the table holds exactly the rows
// acknowledged before it, the server's background flush and merge go on,
// and a new server over the same bucket (a restart) replays and reads it.

var events = arrow.NewSchema([]arrow.Field{
	{Name: "id", Type: arrow.PrimitiveTypes.Int64},
	{Name: "msg", Type: arrow.BinaryTypes.String},
	{Name: "note", Type: arrow.BinaryTypes.String, Nullable: true},
}, nil)

func eventBatch(ids ...int64) arrow.RecordBatch {
	b := array.NewRecordBuilder(testenv.Arrow, events)
	defer b.Release()
	for _, id := range ids {
		b.Field(0).(*array.Int64Builder).Append(id)
		b.Field(1).(*array.StringBuilder).Append(strings.Repeat("m", int(id%3)))
		b.Field(2).AppendNull()
	}
	return b.NewRecordBatch()
}

func ipcStream(t *testing.T, opts []ipc.Option, recs ...arrow.RecordBatch) []byte {
	t.Helper()
	var buf bytes.Buffer
	w := ipc.NewWriter(&buf, append([]ipc.Option{ipc.WithSchema(recs[0].Schema())}, opts...)...)
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

// patch replaces the only occurrence of old in data.
func patch(t *testing.T, data, old, repl []byte) []byte {
	t.Helper()
	if bytes.Count(data, old) != 1 {
		t.Fatalf("pattern %x occurs %d times", old, bytes.Count(data, old))
	}
	return bytes.Replace(data, old, repl, 1)
}

func le32(v ...int32) []byte {
	out := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(out[4*i:], uint32(x))
	}
	return out
}

func post(t *testing.T, f *fixture, path, ctype string, body []byte) (int, string) {
	t.Helper()
	return raw(t, f, "POST", path, ctype, string(body), "")
}

// freshIDs reads every id the table holds, merged or not.
func freshIDs(t *testing.T, c *client.Client, name string) map[int64]int {
	t.Helper()
	recs, err := c.Scan(ctx, name, client.ScanOptions{Fresh: true, Columns: []string{"id"}})
	if err != nil {
		t.Fatal(err)
	}
	return ids(t, recs)
}

func TestPoisonedAndOversizedAppendsAreRefused(t *testing.T) {
	root := "file://" + t.TempDir()
	f := start(t, root, server.Options{MaxBodyBytes: 1 << 20})
	if _, err := f.c.CreateTable(ctx, "events", events); err != nil {
		t.Fatal(err)
	}
	good := eventBatch(1, 2, 3)
	defer good.Release()
	if n, err := f.c.Append(ctx, "events", good); err != nil || n != 3 {
		t.Fatalf("append: %d %v", n, err)
	}
	const rows = "/api/v1/tables/events/rows"
	// msg = "", "m", "mm", … has offsets 0,0,1,3: made negative, and out
	// of order.
	b := eventBatch(3, 4, 5)
	defer b.Release()
	plain := ipcStream(t, nil, b)
	offsets := le32(0, 0, 1, 3)
	nulls := nullIDs(t)
	defer nulls.Release()
	for name, body := range map[string][]byte{
		"negative string offsets":   patch(t, plain, offsets, le32(-8, 0, 1, 3)),
		"string offsets backwards":  patch(t, plain, offsets, le32(0, 3, 1, 3)),
		"string offsets past data":  patch(t, plain, offsets, le32(0, 0, 1, 1<<30)),
		"not Arrow at all":          []byte("hello"),
		"a truncated stream":        plain[:len(plain)/2],
		"a schema and no batches":   plain[:bytes.Index(plain[8:], []byte{0xFF, 0xFF, 0xFF, 0xFF})+8],
		"nulls in a required field": ipcStream(t, nil, nulls),
	} {
		code, msg := post(t, f, rows, server.ArrowStream, body)
		if code != http.StatusBadRequest && !(name == "a schema and no batches" && code == http.StatusOK) {
			t.Errorf("%s: %d %s", name, code, msg)
		}
	}
	// A compressed buffer declaring a terabyte once decompressed.
	big := eventBatch(seq(1000, 2000)...)
	defer big.Release()
	lz := ipcStream(t, []ipc.Option{ipc.WithLZ4()}, big)
	var decl [8]byte
	binary.LittleEndian.PutUint64(decl[:], 8000) // the id column: 1000 int64s
	var huge [8]byte
	binary.LittleEndian.PutUint64(huge[:], 1<<40)
	if code, msg := post(t, f, rows, server.ArrowStream, patch(t, lz, decl[:], huge[:])); code != http.StatusRequestEntityTooLarge {
		t.Errorf("decompression bomb: %d %s", code, msg)
	}
	// A body declared over the limit is refused before it is read.
	if code, msg := rawLength(t, f, rows, server.ArrowStream, 10<<30); code != http.StatusRequestEntityTooLarge {
		t.Errorf("declared 10 GB: %d %s", code, msg)
	}
	// The same on create: a table is not needed to be attacked.
	if code, msg := raw(t, f, "PUT", "/api/v1/tables/bomb", server.ArrowStream, string(patch(t, lz, decl[:], huge[:])), ""); code != http.StatusRequestEntityTooLarge {
		t.Errorf("create with a bomb: %d %s", code, msg)
	}
	if _, err := f.c.Describe(ctx, "bomb"); !client.IsStatus(err, http.StatusNotFound) {
		t.Errorf("a refused create left a table: %v", err)
	}
	// Nothing refused is stored; the background flush and merge go on;
	// a restarted server reads the same.
	if got := freshIDs(t, f.c, "events"); len(got) != 3 {
		t.Fatalf("after refusals the table holds %v", got)
	}
	if err := f.c.CheckpointLSM(ctx, "events"); err != nil {
		t.Fatalf("checkpoint after refusals: %v", err)
	}
	if err := f.srv.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	g := start(t, root, server.Options{})
	if got := freshIDs(t, g.c, "events"); len(got) != 3 || got[1] != 1 || got[3] != 1 {
		t.Fatalf("after a restart the table holds %v", got)
	}
}

func seq(from, to int64) []int64 {
	var out []int64
	for i := from; i < to; i++ {
		out = append(out, i)
	}
	return out
}

// nullIDs is a batch of the table's schema whose non-nullable id column
// carries a null marker.
func nullIDs(t *testing.T) arrow.RecordBatch {
	s := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		{Name: "msg", Type: arrow.BinaryTypes.String}}, nil)
	b := array.NewRecordBuilder(testenv.Arrow, s)
	defer b.Release()
	b.Field(0).(*array.Int64Builder).AppendNull()
	b.Field(1).(*array.StringBuilder).Append("x")
	return b.NewRecordBatch()
}

// postHead opens a connection and sends a POST's headers, declaring a
// body of n bytes, and the first bytes of it; the caller sends the rest,
// or not.
func postHead(t *testing.T, f *fixture, path, ctype string, n int64, first string) net.Conn {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(f.http.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: %s\r\nContent-Length: %d\r\n\r\n%s", path, ctype, n, first)
	return conn
}

// rawLength sends headers declaring a body of n bytes, and no body.
func rawLength(t *testing.T, f *fixture, path, ctype string, n int64) (int, string) {
	t.Helper()
	resp, err := http.ReadResponse(bufio.NewReader(postHead(t, f, path, ctype, n, "")), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(data)
}

func TestValuesAreStoredAsSentOrRefused(t *testing.T) {
	f := start(t, "file://"+t.TempDir(), server.Options{MaxBodyBytes: 4096})
	if _, err := f.c.CreateTable(ctx, "events", events); err != nil {
		t.Fatal(err)
	}
	const rows = "/api/v1/tables/events/rows"
	for name, body := range map[string]string{
		"a null id":                    `{"id": null, "msg": "a"}`,
		"a missing id":                 `{"msg": "a"}`,
		"a missing required string":    `{"id": 1}`,
		"a typo in a key":              `{"id": 1, "msg": "a", "mgs": "b"}`,
		"a fraction in an integer":     `{"id": 1.5, "msg": "a"}`,
		"a good line then a bad one":   "{\"id\": 1, \"msg\": \"a\"}\n{\"id\": \"x\", \"msg\": \"b\"}",
		"a good line then not JSON":    "{\"id\": 1, \"msg\": \"a\"}\n{\"id\": 2, \"msg\"",
		"a body over the limit at end": strings.Repeat("{\"id\": 1, \"msg\": \"a\"}\n", 300),
		"a byte that is not UTF-8":     "{\"id\": 1, \"msg\": \"a\xffb\"}",
		"half a surrogate pair":        `{"id": 1, "msg": "a\ud800b"}`,
	} {
		code, msg := post(t, f, rows, server.NDJSON, []byte(body))
		want := http.StatusBadRequest
		if strings.Contains(name, "over the limit") {
			want = http.StatusRequestEntityTooLarge
		}
		if code != want {
			t.Errorf("%s: %d %s", name, code, msg)
		}
		if want == http.StatusBadRequest && !strings.Contains(msg, "JSON line ") {
			t.Errorf("%s: the error does not name the line: %s", name, msg)
		}
	}
	if got := freshIDs(t, f.c, "events"); len(got) != 0 {
		t.Fatalf("refused requests stored %v", got)
	}
	// Asked to, unknown keys are dropped; values come back as sent.
	code, msg := post(t, f, rows+"?ignore_unknown=true", server.NDJSON, []byte(`{"id": 7, "msg": "", "mgs": "b", "note": null}`))
	if code != http.StatusOK {
		t.Fatalf("ignore_unknown: %d %s", code, msg)
	}
	code, msg = raw(t, f, "GET", rows+"?fresh=true&format=jsonl", "", "", "")
	if code != http.StatusOK || strings.TrimSpace(msg) != `{"id":7,"msg":"","note":null}` {
		t.Fatalf("read back: %d %q", code, msg)
	}
	if code, msg := raw(t, f, "GET", rows+"?tag=../../x", "", "", ""); code != http.StatusBadRequest {
		t.Fatalf("a tag outside the names allowed: %d %s", code, msg)
	}
	if code, msg := raw(t, f, "POST", rows, "text/plain", "x", ""); code != http.StatusUnsupportedMediaType {
		t.Fatalf("wrong content type: %d %s", code, msg)
	}
}

func TestNestedColumnsAndSchemasTheEngineCannotStore(t *testing.T) {
	f := start(t, "file://"+t.TempDir(), server.Options{})
	schema := `{"fields":[{"name":"id","type":"int64"},
		{"name":"meta","type":"struct","nullable":true,"fields":[{"name":"score","type":"float64"},{"name":"tags","type":"list","nullable":true,"items":{"type":"string"}}]},
		{"name":"attrs","type":"map","nullable":true,"key":{"type":"string"},"value":{"type":"int64","nullable":true}}]}`
	if code, msg := raw(t, f, "PUT", "/api/v1/tables/nested", "application/json", schema, ""); code != http.StatusCreated {
		t.Fatalf("create nested: %d %s", code, msg)
	}
	lines := `{"id": 1, "meta": {"score": 0.5, "tags": ["a", "b"]}, "attrs": [{"key": "k", "value": 3}]}
{"id": 2, "meta": null, "attrs": null}
{"id": 3, "meta": {"score": 1.5, "tags": null}, "attrs": []}
`
	if code, msg := post(t, f, "/api/v1/tables/nested/rows", server.NDJSON, []byte(lines)); code != http.StatusOK {
		t.Fatalf("append nested: %d %s", code, msg)
	}
	if code, msg := post(t, f, "/api/v1/tables/nested/rows", server.NDJSON, []byte(`{"id": 4, "meta": {"tags": []}}`)); code != http.StatusBadRequest || !strings.Contains(msg, "meta.score") {
		t.Fatalf("a null in a required nested field: %d %s", code, msg)
	}
	if err := f.c.CheckpointLSM(ctx, "nested"); err != nil {
		t.Fatal(err)
	}
	code, msg := raw(t, f, "GET", "/api/v1/tables/nested/rows?format=jsonl&filter=id%3E%3D2", "", "", "")
	if code != http.StatusOK || strings.Count(msg, "\n") != 2 || !strings.Contains(msg, `"meta":{"score":1.5,"tags":null}`) {
		t.Fatalf("scan nested as JSON lines: %d %q", code, msg)
	}
	recs, err := f.c.Scan(ctx, "nested", client.ScanOptions{})
	if err != nil || len(ids(t, recs)) != 3 {
		t.Fatalf("scan nested as Arrow: %v", err)
	}
	for name, body := range map[string]string{
		"no fields":             `{"fields":[]}`,
		"a name twice":          `{"fields":[{"name":"a","type":"int64"},{"name":"a","type":"string"}]}`,
		"an empty name":         `{"fields":[{"name":"","type":"int64"}]}`,
		"an empty struct":       `{"fields":[{"name":"s","type":"struct","fields":[]}]}`,
		"a newline in a name":   `{"fields":[{"name":"a\nb","type":"int64"}]}`,
		"half a surrogate pair": `{"fields":[{"name":"a\ud800","type":"int64"}]}`,
		"a name of 2000 bytes":  `{"fields":[{"name":"` + strings.Repeat("x", 2000) + `","type":"int64"}]}`,
	} {
		// Each under a name of its own: one wrongly created must not make
		// the next one's 409 pass for a refusal.
		path := "/api/v1/tables/bad-" + strings.ReplaceAll(name, " ", "-")
		if code, msg := raw(t, f, "PUT", path, "application/json", body, ""); code != http.StatusBadRequest {
			t.Errorf("%s: %d %s", name, code, msg)
		}
	}
	union := arrow.NewSchema([]arrow.Field{{Name: "u", Type: arrow.DenseUnionOf(
		[]arrow.Field{{Name: "a", Type: arrow.PrimitiveTypes.Int64}}, []arrow.UnionTypeCode{0})}}, nil)
	if _, err := f.c.CreateTable(ctx, "union", union); !client.IsStatus(err, http.StatusBadRequest) {
		t.Fatalf("a union column: %v", err)
	}
}

func TestSlowBodiesAndLargeTakes(t *testing.T) {
	f := start(t, "file://"+t.TempDir(), server.Options{BodyGrace: 200 * time.Millisecond, MinBodyRate: 1000,
		MemoryBudget: 100 << 20, BusyWait: 100 * time.Millisecond, MaxTakeKeys: 10})
	if _, err := f.c.CreateTable(ctx, "events", events); err != nil {
		t.Fatal(err)
	}
	// A body trickled a byte at a time is cut off.
	conn := postHead(t, f, "/api/v1/tables/events/rows", server.NDJSON, 100_000, "")
	start := time.Now()
	answer := make(chan string, 1)
	go func() {
		data, _ := io.ReadAll(conn)
		answer <- string(data)
	}()
	var got string
	for got == "" {
		select {
		case got = <-answer:
		case <-time.After(100 * time.Millisecond):
			if time.Since(start) > 20*time.Second {
				t.Fatal("the server never answered a trickled body")
			}
			_, _ = conn.Write([]byte("{"))
		}
	}
	if !strings.Contains(got, "408") || time.Since(start) > 10*time.Second {
		t.Fatalf("slow body after %v: %q", time.Since(start), got)
	}
	// A take of more keys than allowed: refused before any work.
	if code, msg := post(t, f, "/api/v1/tables/events/take", "application/json", []byte(`{"keys":[1,2,3,4,5,6,7,8,9,10,11]}`)); code != http.StatusRequestEntityTooLarge {
		t.Fatalf("take of 11 keys: %d %s", code, msg)
	}
}

// Reads share their parts of the memory budget: while a take whose body
// is on its way holds them, a scan waits a moment, then gets 429 with
// Retry-After; an append, in the write share, goes through meanwhile.
func TestABusyServerAnswers429(t *testing.T) {
	f := start(t, "file://"+t.TempDir(), server.Options{MemoryBudget: 300_000, BusyWait: 100 * time.Millisecond})
	if _, err := f.c.CreateTable(ctx, "events", events); err != nil {
		t.Fatal(err)
	}
	// A take whose declared body takes the whole holds part, sent slowly.
	postHead(t, f, "/api/v1/tables/events/take", "application/json", 100_000, "{")
	var code int
	var resp *http.Response
	var err error
	for range 50 {
		req, rerr := http.NewRequest("GET", f.http.URL+"/api/v1/tables/events/rows", nil)
		if rerr != nil {
			t.Fatal(rerr)
		}
		if resp, err = http.DefaultClient.Do(req); err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if code = resp.StatusCode; code == http.StatusTooManyRequests {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if code != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("a scan while the budget is held: %d, Retry-After %q", code, resp.Header.Get("Retry-After"))
	}
	if code, msg := post(t, f, "/api/v1/tables/events/rows", server.NDJSON, []byte(`{"id": 1, "msg": "a"}`)); code != http.StatusOK {
		t.Fatalf("an append while reads hold their parts: %d %s", code, msg)
	}
}

// A query string the route would misread is refused before anything is
// done: a parameter it does not take, one given twice, a value not of its
// type. What the OpenAPI document declares passes.
func TestQueryStringsARouteWouldMisreadAreRefused(t *testing.T) {
	f := start(t, "file://"+t.TempDir(), server.Options{})
	if _, err := f.c.CreateTable(ctx, "events", events); err != nil {
		t.Fatal(err)
	}
	const rows = "/api/v1/tables/events/rows"
	if code, msg := post(t, f, rows, server.NDJSON, []byte(`{"id": 1, "msg": "a"}`+"\n"+`{"id": 2, "msg": "b"}`)); code != http.StatusOK {
		t.Fatalf("append: %d %s", code, msg)
	}
	for _, c := range []struct{ method, path, want string }{
		{"GET", rows + "?fitler=id%3D1", "takes no fitler= parameter (it takes as_of=, columns=, filter=, format=, fragment=, fresh=, limit=, offsets=, tag=, version=, written=)"},
		{"GET", rows + "?fresh=1", `fresh="1": want true or false`},
		{"GET", rows + "?format=json", `format="json": want one of jsonl, arrow`},
		{"GET", rows + "?columns=id&columns=msg", "columns= is given 2 times"},
		{"GET", rows + "?limit=ten", `limit="ten": want an integer`},
		{"GET", rows + "?version=%zz", "the query string does not parse"},
		{"GET", "/api/v1/tables/events/versions?limit=1.5", "want an integer"},
		{"POST", rows + "?ignore_unknown=yes", "want true or false"},
		{"GET", "/healthz?verbose=true", "takes no verbose= parameter (it takes no query parameters)"},
		{"DELETE", rows + "?filter=id%3D1&filter=id%3D2", "filter= is given 2 times"},
		{"GET", rows + "?columns=id,,msg", "an empty column name"},
	} {
		code, body := raw(t, f, c.method, c.path, server.NDJSON, "", "")
		var e struct{ Error struct{ Message string } }
		_ = json.Unmarshal([]byte(body), &e)
		if msg := e.Error.Message; code != http.StatusBadRequest || !strings.Contains(msg, c.want) {
			t.Errorf("%s %s: %d %s, want 400 saying %q", c.method, c.path, code, body, c.want)
		}
	}
	if got := freshIDs(t, f.c, "events"); len(got) != 2 {
		t.Fatalf("after the refused requests the table holds %v, want ids 1 and 2", got)
	}
	code, msg := raw(t, f, "GET", rows+"?fresh=true&format=jsonl&version=&columns=%60id%60", "", "", "")
	if code != http.StatusOK || strings.Count(msg, `{"id":`) != 2 || strings.Contains(msg, "msg") {
		t.Fatalf("a good query: %d %s", code, msg)
	}
	for limit, want := range map[string]int{"0": 0, "1": 1, "5": 2} {
		code, msg := raw(t, f, "GET", rows+"?fresh=true&format=jsonl&limit="+limit, "", "", "")
		if code != http.StatusOK || strings.Count(msg, `{"id":`) != want {
			t.Errorf("limit=%s: %d %q, want %d rows", limit, code, msg, want)
		}
	}
	resp, _ := send(t, f, "GET", rows+"?fresh=true&format=arrow", http.Header{"Accept": {server.NDJSON}}, "")
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != server.ArrowStream {
		t.Fatalf("format=arrow with Accept asking for JSON lines: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
}

// withEvents serves root with the table "events" created, and returns an
// append of those ids (one request).
func withEvents(t *testing.T, root string, opts server.Options) (*fixture, func(ids ...int64) error) {
	t.Helper()
	f := start(t, root, opts)
	if _, err := f.c.CreateTable(ctx, "events", events); err != nil {
		t.Fatal(err)
	}
	return f, func(ids ...int64) error {
		rec := eventBatch(ids...)
		defer rec.Release()
		_, err := f.c.Append(ctx, "events", rec)
		return err
	}
}

// An append whose WAL entry landed while the store stopped answering (the
// create's answer lost, the read-back failed) is answered 503
// outcome_unknown. A client whose requests are unnamed hands it back
// instead of retrying (sent again, the rows could be stored twice); a
// client naming its requests (the default) sends it again under its name,
// and the shard, finding its entry at the position, answers a duplicate.
// Either way the rows are stored once.
func TestAnAppendWhoseOutcomeIsUnknownIsStoredOnce(t *testing.T) {
	for _, named := range []bool{false, true} {
		t.Run(fmt.Sprintf("named=%v", named), func(t *testing.T) { outcomeUnknown(t, named) })
	}
}

func outcomeUnknown(t *testing.T, named bool) {
	// The shard fails the append at the first unanswered read, as it does
	// once the store has been away for longer than ResolveWithin.
	f, appendIDs := withEvents(t, "file://"+t.TempDir(), server.Options{Shard: walshard.Options{ResolveWithin: -1}})
	if !named {
		c, err := client.New(f.http.URL, &client.Options{NoNames: true})
		if err != nil {
			t.Fatal(err)
		}
		appendIDs = func(ids ...int64) error {
			rec := eventBatch(ids...)
			defer rec.Release()
			_, err := c.Append(ctx, "events", rec)
			return err
		}
	}
	if err := appendIDs(1); err != nil {
		t.Fatal(err)
	}
	var creates, reads atomic.Int64
	f.inject(fault.InjectorFunc(func(op fault.Op, key string) fault.Fault {
		if !strings.Contains(key, "/wal/") {
			return fault.Fault{}
		}
		switch {
		case op == fault.OpPutIfAbsent && creates.Add(1) == 1:
			return fault.Fault{Action: fault.LoseResponse}
		case op == fault.OpGet && reads.Add(1) == 1:
			return fault.Fault{Action: fault.Fail}
		}
		return fault.Fault{}
	}))
	err := appendIDs(2)
	switch {
	case named && err != nil:
		t.Fatalf("a named append whose entry landed unseen: %v, want it sent again and answered", err)
	case !named && (!client.IsCode(err, api.CodeOutcomeUnknown) || !client.IsStatus(err, http.StatusServiceUnavailable)):
		t.Fatalf("an unnamed append whose entry landed unseen: %v, want 503 %s", err, api.CodeOutcomeUnknown)
	case !named && creates.Load() != 1:
		t.Fatalf("the WAL entry was created %d times: the client retried an unnamed append whose rows may be stored", creates.Load())
	}
	if err := appendIDs(3); err != nil {
		t.Fatal(err)
	}
	got := freshIDs(t, f.c, "events")
	if len(got) != 3 || got[1] != 1 || got[2] != 1 || got[3] != 1 {
		t.Fatalf("the table holds %v, want ids 1, 2 and 3 once each", got)
	}
}

// A WAL entry of the server's shard lost from the store (no backup): the
// restarted server answers every append and fresh read with 500
// data_missing, which no client retries and which names the repair; once
// the lost entry is set aside, the same server appends again, and the
// table holds every other acknowledged row once.
func TestALostWALEntryIsDataMissingUntilRepaired(t *testing.T) {
	dir := t.TempDir()
	root := "file://" + dir
	first, appendIDs := withEvents(t, root, server.Options{})
	for _, id := range []int64{1, 2, 3} {
		if err := appendIDs(id); err != nil {
			t.Fatal(err)
		}
	}
	first.inject(fault.Always(fault.Fault{Action: fault.Crash}))
	b, err := blob.Open(ctx, root+"/events")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	// The shard's fence is at 1, the appends at 2, 3 and 4.
	if err := b.Delete(ctx, "_shards/srv-test/wal/"+format.Inverted(3)); err != nil {
		t.Fatal(err)
	}
	second := start(t, root, server.Options{})
	rec := eventBatch(4)
	defer rec.Release()
	_, err = second.c.Append(ctx, "events", rec)
	if !client.IsCode(err, api.CodeDataMissing) || !client.IsStatus(err, http.StatusInternalServerError) || !strings.Contains(err.Error(), "--shard srv-test --drop-missing") {
		t.Fatalf("an append over a lost WAL entry: %v, want 500 %s naming the repair", err, api.CodeDataMissing)
	}
	if _, err := second.c.Scan(ctx, "events", client.ScanOptions{Fresh: true}); !client.IsCode(err, api.CodeDataMissing) {
		t.Fatalf("a fresh read over a lost WAL entry: %v, want %s", err, api.CodeDataMissing)
	}
	// Each open claims an epoch and writes a fence before it meets the
	// gap; the server does not open the damaged shard again per request.
	claimed, err := wal.NewestEpoch(ctx, b, "srv-test")
	if err != nil {
		t.Fatal(err)
	}
	for range 5 {
		if _, err := second.c.Append(ctx, "events", rec); !client.IsCode(err, api.CodeDataMissing) {
			t.Fatalf("an append over a lost WAL entry: %v", err)
		}
	}
	if now, err := wal.NewestEpoch(ctx, b, "srv-test"); err != nil || now != claimed {
		t.Fatalf("five appends over the damaged shard took it from epoch %d to %d (%v): each opened it again", claimed, now, err)
	}
	if _, err := walshard.Adopt(ctx, b, "srv-test", &walshard.Options{SetAsideLost: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := second.c.Append(ctx, "events", rec); err != nil {
		t.Fatalf("an append after the repair: %v", err)
	}
	got := freshIDs(t, second.c, "events")
	if len(got) != 3 || got[1] != 1 || got[3] != 1 || got[4] != 1 {
		t.Fatalf("the table holds %v, want ids 1, 3 and 4 once each (2 was lost)", got)
	}
}

// A server whose shard a newer owner took over (here the compactor Job's
// adoption; also an operator's repair, or a second server given the same
// instance id) opens it again on the next request, instead of answering
// 503 unavailable to every append until it is restarted; nothing it
// acknowledged is lost or doubled.
func TestAServerWhoseShardWasTakenOverOpensItAgain(t *testing.T) {
	root := "file://" + t.TempDir()
	f, appendIDs := withEvents(t, root, server.Options{})
	if err := appendIDs(1); err != nil {
		t.Fatal(err)
	}
	b, err := blob.Open(ctx, root+"/events")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if _, err := walshard.Adopt(ctx, b, "srv-test", &walshard.Options{}); err != nil {
		t.Fatal(err)
	}
	for _, id := range []int64{2, 3} {
		if err := appendIDs(id); err != nil {
			t.Fatalf("append %d after the shard was taken over: %v", id, err)
		}
	}
	got := freshIDs(t, f.c, "events")
	if len(got) != 3 || got[1] != 1 || got[2] != 1 || got[3] != 1 {
		t.Fatalf("the table holds %v, want ids 1, 2 and 3 once each", got)
	}
}
