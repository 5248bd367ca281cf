package server

import (
	"bytes"
	"crypto/tls"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"

	"github.com/stratadb/strata/api"
)

// The framing guard. Given a request with both Content-Length and
// Transfer-Encoding: chunked, Go's HTTP server drops the length, reads the
// body as chunked and keeps the connection open. A proxy in front that
// framed the same bytes by their length saw one request where this server
// sees two: the second, hidden in the first one's body, would run unseen
// by the proxy (request smuggling; RFC 9112 §6.3 asks a server to refuse
// such a request, or at least to close the connection after it). By the
// time the handler runs the length is gone, so a guard on each connection
// follows the requests' framing in the bytes as the server reads them,
// and the handler refuses the first request the guard cannot vouch for
// (400 bad_framing, Connection: close): nothing after it on the
// connection runs.

type guardKey struct{}

type guardedListener struct {
	net.Listener
	tls *tls.Config // nil: plain HTTP
	log *slog.Logger
}

func (l guardedListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	if l.tls != nil {
		// The guard reads the plaintext: it wraps the TLS connection,
		// whose handshake runs at the first read, within the deadline
		// the HTTP server sets for a request's head.
		c = &tlsConn{Conn: tls.Server(c, l.tls), raw: c, log: l.log}
	}
	return &guardedConn{Conn: c}, nil
}

// guardedConn follows the framing of the requests read from it. An HTTP/1
// connection's requests reach the handler one at a time and in order, and
// each only once the server has read its head: the handler's count of
// them names the head the framing scanner has seen.
type guardedConn struct {
	net.Conn
	mu     sync.Mutex
	sc     framing
	served int // requests handed to the handler
}

func (c *guardedConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.mu.Lock()
		c.sc.feed(p[:n])
		c.mu.Unlock()
	}
	return n, err
}

// next counts a request handed to the handler and returns why it must be
// refused, or "".
func (c *guardedConn) next() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.served++
	if c.sc.badFrom > 0 && c.served >= c.sc.badFrom {
		return c.sc.why
	}
	return ""
}

// checkFraming refuses a request the connection's guard cannot vouch for,
// with refuse (writeError, or the catalog's error model); false when it
// answered.
func checkFraming(w http.ResponseWriter, r *http.Request, refuse func(http.ResponseWriter, int, string, string)) bool {
	g, ok := r.Context().Value(guardKey{}).(*guardedConn)
	if !ok {
		return true
	}
	if why := g.next(); why != "" {
		w.Header().Set("Connection", "close")
		refuse(w, http.StatusBadRequest, api.CodeBadFraming, why)
		return false
	}
	return true
}

// The framing scanner's states.
const (
	inHead      = iota // the request line and header lines
	inBody             // a body of known length
	inChunkSize        // a chunk-size line
	inChunk            // a chunk's data
	inChunkEnd         // the line break after a chunk's data
	inTrailer          // the trailer lines after the last chunk
	stopped            // nothing after this on the connection runs
)

// maxLine bounds the bytes of a line the scanner keeps: a longer header
// line is kept only so far (its name is what counts), a longer chunk-size
// line is malformed (Go's reader refuses it too).
const maxLine = 4096

// framing follows HTTP/1 request framing byte by byte: the heads, then
// each body by its length or by its chunks. badFrom is the number (from 1)
// of the first request it cannot vouch for: one whose head had both a
// length and a transfer coding, or any after a point where it lost track.
type framing struct {
	state   int
	line    []byte
	long    bool  // the current line ran over maxLine
	remain  int64 // bytes left of a body or a chunk
	heads   int   // request heads begun
	started bool  // the current head's request line was read
	http10  bool
	length  string // the Content-Length, "" if none
	lengths int
	codings int
	chunked bool
	badFrom int
	why     string
}

func (f *framing) feed(p []byte) {
	for len(p) > 0 && f.state != stopped {
		switch f.state {
		case inBody, inChunk:
			n := int(min(f.remain, int64(len(p))))
			f.remain -= int64(n)
			p = p[n:]
			if f.remain == 0 {
				if f.state == inBody {
					f.state = inHead
				} else {
					f.state = inChunkEnd
				}
			}
			continue
		}
		i := bytes.IndexByte(p, '\n')
		chunk := p
		if i >= 0 {
			chunk = p[:i]
		}
		if room := maxLine - len(f.line); room > 0 {
			f.line = append(f.line, chunk[:min(room, len(chunk))]...)
		}
		if len(f.line)+len(chunk) > maxLine {
			f.long = true
		}
		if i < 0 {
			return
		}
		p = p[i+1:]
		line := strings.TrimSuffix(string(f.line), "\r")
		long := f.long
		f.line, f.long = f.line[:0], false
		f.endLine(line, long)
	}
}

// lose stops the scanner: request n and those after it are refused.
func (f *framing) lose(n int, why string) {
	f.state, f.badFrom, f.why = stopped, n, why
}

func (f *framing) endLine(line string, long bool) {
	switch f.state {
	case inHead:
		f.headLine(line, long)
	case inChunkSize:
		size, _, _ := strings.Cut(line, ";")
		n, err := strconv.ParseUint(strings.TrimSpace(size), 16, 63)
		if long || err != nil {
			f.lose(f.heads+1, "the connection's framing was lost in a malformed chunk size")
			return
		}
		if n == 0 {
			f.state = inTrailer
		} else {
			f.state, f.remain = inChunk, int64(n)
		}
	case inChunkEnd:
		if line != "" {
			f.lose(f.heads+1, "the connection's framing was lost in a chunk longer than its size")
			return
		}
		f.state = inChunkSize
	case inTrailer:
		if line == "" {
			f.state = inHead
		}
	}
}

func (f *framing) headLine(line string, long bool) {
	if !f.started {
		if line == "" {
			return // an empty line before a request line is allowed
		}
		f.heads++
		f.started, f.http10 = true, strings.HasSuffix(line, " HTTP/1.0")
		f.length, f.lengths, f.codings, f.chunked = "", 0, 0, false
		return
	}
	if line != "" {
		name, value, _ := strings.Cut(line, ":")
		value = strings.TrimSpace(value)
		switch strings.ToLower(name) {
		case "content-length":
			if long || f.lengths > 0 && value != f.length {
				f.lose(f.heads, "the request has two Content-Lengths")
			}
			f.length, f.lengths = value, f.lengths+1
		case "transfer-encoding":
			if long {
				f.lose(f.heads, "the request's Transfer-Encoding is too long")
			}
			f.codings++
			f.chunked = strings.EqualFold(value, "chunked")
		}
		return
	}
	f.started = false
	switch {
	case f.lengths > 0 && f.codings > 0:
		f.lose(f.heads, "the request has both Content-Length and Transfer-Encoding: its body could be framed two ways")
	case f.codings > 0 && f.http10:
		// HTTP/1.0 has no transfer codings: the server ignores the header
		// and reads no body.
	case f.codings > 0:
		if f.codings > 1 || !f.chunked {
			f.lose(f.heads, "the request's Transfer-Encoding is not chunked")
			return
		}
		f.state = inChunkSize
	case f.lengths > 0:
		n, err := strconv.ParseInt(f.length, 10, 64)
		if err != nil || strings.TrimLeft(f.length, "0123456789") != "" {
			f.lose(f.heads, "the request's Content-Length is not a length")
			return
		}
		if n > 0 {
			f.state, f.remain = inBody, n
		}
	}
}
