package server

import (
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stratadb/strata/api"
	"github.com/stratadb/strata/table/value"
)

// keysBody is a take's body of n keys, made as it is read; read counts
// the bytes read from it.
type keysBody struct {
	n, i int
	read int64
	buf  []byte
}

func (b *keysBody) Read(p []byte) (int, error) {
	for len(b.buf) < len(p) && b.i <= b.n {
		switch {
		case b.i == 0:
			b.buf = append(b.buf, `{"column":"id","keys":[0`...)
		case b.i == b.n:
			b.buf = append(b.buf, "]}"...)
		default:
			b.buf = append(b.buf, ",1234567"...)
		}
		b.i++
	}
	if len(b.buf) == 0 {
		return 0, io.EOF
	}
	n := copy(p, b.buf)
	b.buf = b.buf[n:]
	b.read += int64(n)
	return n, nil
}

// A take's keys are read one at a time and the key past the limit ends
// the reading with 413: a body of seven million keys is refused after a
// few kilobytes, not decoded whole first.
func TestATakeOfTooManyKeysIsRefusedBeforeItsBodyIsRead(t *testing.T) {
	body := &keysBody{n: 7_000_000}
	_, err := decodeTake(body, 100)
	var ae *apiError
	if !errors.As(err, &ae) || ae.status != http.StatusRequestEntityTooLarge || ae.code != api.CodeTooManyKeys ||
		!strings.Contains(ae.msg, "at most 100") {
		t.Fatalf("7,000,000 keys: %v", err)
	}
	if body.read > 64<<10 {
		t.Fatalf("%d bytes read to refuse a take of 7,000,000 keys, limit 100", body.read)
	}
	req, err := decodeTake(&keysBody{n: 100}, 100)
	if err != nil || len(req.Keys) != 100 || req.Column != "id" || value.Compare(req.Keys[99], value.Int(1234567)) != 0 {
		t.Fatalf("100 keys: %d keys, column %q, %v", len(req.Keys), req.Column, err)
	}
	if _, err := decodeTake(strings.NewReader(`{"keys": "x"}`), 100); err == nil {
		t.Fatal(`{"keys": "x"} was taken`)
	}
}
