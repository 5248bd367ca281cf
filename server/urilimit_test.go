package server_test

import (
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/server"
)

// A filter too long for a URL (2.4 MB) gets an answer: 414 with a message
// naming the limit and what to do, not a connection the server drops.
func TestAFilterTooLongForAURLIsAnswered414(t *testing.T) {
	srv, err := server.New(&server.Options{Bucket: "file://" + t.TempDir(), Instance: "test", Open: blob.Open,
		Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := srv.HTTPServer()
	go hs.Serve(server.Listener(ln))
	defer hs.Close()
	filter := "id IN (" + strings.Repeat("1234567, ", 2_400_000/9) + "1)"
	resp, err := http.Get("http://" + ln.Addr().String() + "/api/v1/tables/events/rows?filter=" + strings.ReplaceAll(filter, " ", "%20"))
	if err != nil {
		t.Fatalf("a 2.4 MB filter got no answer: %v", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusRequestURITooLong || !strings.Contains(string(body), "at most 1048576") {
		t.Fatalf("a 2.4 MB filter: %d %s", resp.StatusCode, body)
	}
}
