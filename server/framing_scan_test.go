package server

import (
	"fmt"
	"testing"
)

// The framing scanner finds request heads past bodies of either framing,
// however the bytes arrive, and names the first request it cannot vouch
// for.
func TestFramingFollowsPipelinedRequests(t *testing.T) {
	const (
		get     = "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"
		both    = "POST /x HTTP/1.1\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"
		chunked = "POST /x HTTP/1.1\r\nTransfer-Encoding: Chunked\r\n\r\n4;ext=1\r\nab\r\n\r\n0\r\nTrailer: v\r\n\r\n"
	)
	// A body of known length that looks like a request with both headers.
	inner := "GET / HTTP/1.1\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n"
	fake := fmt.Sprintf("POST /x HTTP/1.1\r\nContent-Length: %d\r\n\r\n%s", len(inner), inner)
	cases := []struct {
		name, in string
		badFrom  int
	}{
		{"plain requests", get + fake + chunked + get, 0},
		{"both headers, third", get + chunked + both + get, 3},
		{"both headers, lower case", "post / HTTP/1.1\r\ncontent-length: 3\r\ntransfer-encoding: chunked\r\n\r\n", 1},
		{"HTTP/1.0 with both", "POST / HTTP/1.0\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n", 1},
		{"two lengths", "POST / HTTP/1.1\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\n", 1},
		{"a coding other than chunked", "POST / HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n", 1},
		{"a length that is not one", get + "POST / HTTP/1.1\r\nContent-Length: +3\r\n\r\nabc", 2},
		{"a chunk size that is not hex", "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n" + get, 2},
		{"a chunk longer than its size", "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nab\r\n0\r\n\r\n" + get, 2},
	}
	for _, c := range cases {
		var whole, bytewise framing
		whole.feed([]byte(c.in))
		for i := range len(c.in) {
			bytewise.feed([]byte{c.in[i]})
		}
		if whole.badFrom != c.badFrom || bytewise.badFrom != c.badFrom {
			t.Errorf("%s: refused from request %d (fed at once) and %d (byte by byte), want %d (%s)",
				c.name, whole.badFrom, bytewise.badFrom, c.badFrom, whole.why)
		}
	}
	var f framing
	f.feed([]byte(get + fake + chunked + get))
	if f.heads != 4 || f.state != inHead {
		t.Fatalf("%d heads, state %d after four requests", f.heads, f.state)
	}
}
