package server_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stratadb/strata/api"
	"github.com/stratadb/strata/client"
	"github.com/stratadb/strata/server"
)

// exchange writes raw to a new connection to f's server and reads the
// answers until the server closes it (or a second passes without one).
func exchange(t *testing.T, f *fixture, raw string) []*http.Response {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(f.http.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, raw); err != nil {
		t.Fatal(err)
	}
	// The deadline only ends a wait for an answer that is not coming: a
	// server that keeps the connection open after its last answer.
	_ = conn.SetReadDeadline(time.Now().Add(time.Second))
	br := bufio.NewReader(conn)
	var out []*http.Response
	for {
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			return out
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		resp.Body = io.NopCloser(strings.NewReader(string(body)))
		out = append(out, resp)
	}
}

func errorCode(t *testing.T, resp *http.Response) string {
	t.Helper()
	var eb api.ErrorBody
	data, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(data, &eb); err != nil {
		t.Fatalf("%d %q: %v", resp.StatusCode, data, err)
	}
	return eb.Error.Code
}

// A request with both Content-Length and Transfer-Encoding: chunked is
// framed one way by a proxy that reads the length and another by a server
// that reads the chunks: a second request hidden in its body would run
// unseen by the proxy. The server refuses it with 400 and closes the
// connection, so the hidden request never runs.
func TestARequestFramedTwoWaysIsRefusedAndTheConnectionClosed(t *testing.T) {
	f := start(t, "file://"+t.TempDir(), server.Options{})
	schema := `{"fields":[{"name":"id","type":"int64"}]}`
	hidden := fmt.Sprintf("PUT /api/v1/tables/smuggled HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s",
		len(schema), schema)
	body := "0\r\n\r\n" + hidden
	for name, head := range map[string]string{
		"length first":  fmt.Sprintf("POST /api/v1/tables HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\nTransfer-Encoding: chunked\r\n\r\n", len(body)),
		"chunked first": fmt.Sprintf("POST /api/v1/tables HTTP/1.1\r\nHost: x\r\ntransfer-encoding: chunked\r\ncontent-length: %d\r\n\r\n", len(body)),
	} {
		// A plain request first, on the same connection, is answered as
		// usual: the guard counts requests correctly.
		answers := exchange(t, f, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"+head+body)
		if len(answers) != 2 || answers[0].StatusCode != http.StatusOK {
			t.Fatalf("%s: %d answers, want the health check's and one refusal", name, len(answers))
		}
		refusal := answers[1]
		if refusal.StatusCode != http.StatusBadRequest || !refusal.Close || errorCode(t, refusal) != api.CodeBadFraming {
			t.Fatalf("%s: %d close=%v, want 400 %s with Connection: close", name, refusal.StatusCode, refusal.Close, api.CodeBadFraming)
		}
		if _, err := f.c.Describe(ctx, "smuggled"); !client.IsStatus(err, http.StatusNotFound) {
			t.Fatalf("%s: the hidden request ran: %v", name, err)
		}
	}
	// Under the Iceberg catalog, the refusal is in its error model.
	head := fmt.Sprintf("POST /iceberg/v1/namespaces/default/tables/t HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\nTransfer-Encoding: chunked\r\n\r\n", len(body))
	answers := exchange(t, f, head+body)
	var model struct {
		Error struct {
			Type string `json:"type"`
			Code int    `json:"code"`
		} `json:"error"`
	}
	if len(answers) != 1 || answers[0].StatusCode != http.StatusBadRequest || !answers[0].Close ||
		json.NewDecoder(answers[0].Body).Decode(&model) != nil || model.Error.Code != 400 || model.Error.Type != "BadRequestException" {
		t.Fatalf("a request framed two ways under /iceberg: %d answers, %+v", len(answers), model)
	}
	// Chunked alone, and requests after it on the same connection, are
	// served.
	chunked := "PUT /api/v1/tables/chunked HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n" +
		fmt.Sprintf("%x\r\n%s\r\n0\r\n\r\n", len(schema), schema)
	answers = exchange(t, f, chunked+"GET /api/v1/tables/chunked HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
	if len(answers) != 2 || answers[0].StatusCode != http.StatusCreated || answers[1].StatusCode != http.StatusOK {
		t.Fatalf("a chunked create and a describe after it: %d answers", len(answers))
	}
}

// A chunked body whose framing is malformed is the client's fault: 400
// bad_framing, and the connection closes (where the next request starts
// is unknown).
func TestAMalformedChunkedBodyIs400(t *testing.T) {
	f := start(t, "file://"+t.TempDir(), server.Options{})
	if _, err := f.c.CreateTable(ctx, "events", events); err != nil {
		t.Fatal(err)
	}
	for name, chunks := range map[string]string{
		"a chunk size that is not hex": "zz\r\n{}\r\n0\r\n\r\n",
		"a chunk longer than its size": "2\r\n{\"id\":1}\r\n0\r\n\r\n",
	} {
		for _, path := range []string{"/api/v1/tables/events/rows", "/api/v1/tables/more"} {
			ctype := server.NDJSON
			if path == "/api/v1/tables/more" {
				ctype = api.JSON
			}
			method := map[bool]string{true: "POST", false: "PUT"}[ctype == server.NDJSON]
			answers := exchange(t, f, method+" "+path+" HTTP/1.1\r\nHost: x\r\nContent-Type: "+ctype+"\r\nTransfer-Encoding: chunked\r\n\r\n"+chunks)
			if len(answers) != 1 {
				t.Fatalf("%s to %s: %d answers", name, path, len(answers))
			}
			if a := answers[0]; a.StatusCode != http.StatusBadRequest || !a.Close || errorCode(t, a) != api.CodeBadFraming {
				t.Fatalf("%s to %s: %d close=%v", name, path, a.StatusCode, a.Close)
			}
		}
	}
}
