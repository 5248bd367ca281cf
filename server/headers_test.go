package server_test

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stratadb/strata/api"
	"github.com/stratadb/strata/server"
)

// The library refuses a token no client can send, as the command line does.
func TestABlankTokenIsAnInvalidOption(t *testing.T) {
	for _, token := range []string{" ", "\t\n", " secret"} {
		o := server.Options{Bucket: "mem://", Instance: "test", Token: token}
		if err := o.Validate(); !errors.Is(err, server.ErrInvalidOptions) || !strings.Contains(err.Error(), "Token") {
			t.Errorf("Token %q: %v", token, err)
		}
	}
	o := server.Options{Bucket: "mem://", Instance: "test", Token: "secret"}
	if err := o.Validate(); err != nil {
		t.Fatalf("Token secret: %v", err)
	}
}

// An Idempotency-Key is taken up to 252 bytes and a Strata-Producer up to
// 247, as the README, the OpenAPI document and the refusal say: each is
// kept behind its prefix in a name of 256 bytes.
func TestTheIdempotencyLimitsAreTheOnesTheWordsSay(t *testing.T) {
	f := start(t, "file://"+t.TempDir(), server.Options{})
	if code, body := raw(t, f, "PUT", "/api/v1/tables/events", "application/json", `{"fields":[{"name":"id","type":"int64"}]}`, ""); code != http.StatusOK && code != http.StatusCreated {
		t.Fatalf("create: %d %s", code, body)
	}
	appendNamed := func(header, value string, seq bool) (int, string) {
		req, _ := http.NewRequest("POST", f.http.URL+"/api/v1/tables/events/rows", strings.NewReader(`{"id":1}`+"\n"))
		req.Header.Set("Content-Type", api.NDJSON)
		req.Header.Set(header, value)
		if seq {
			req.Header.Set(api.HeaderSequence, "1")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for _, c := range []struct {
		header string
		n      int
		seq    bool
		ok     bool
	}{
		{api.HeaderIdempotencyKey, api.MaxIdempotencyKeyBytes, false, true},
		{api.HeaderIdempotencyKey, api.MaxIdempotencyKeyBytes + 1, false, false},
		{api.HeaderProducer, api.MaxProducerBytes, true, true},
		{api.HeaderProducer, api.MaxProducerBytes + 1, true, false},
	} {
		code, body := appendNamed(c.header, strings.Repeat("k", c.n), c.seq)
		want := fmt.Sprintf("%s is %d bytes; at most %d", c.header, c.n, c.n-1)
		if c.ok && code != http.StatusOK || !c.ok && (code != http.StatusBadRequest || !strings.Contains(body, want)) {
			t.Errorf("%s of %d bytes: %d %s", c.header, c.n, code, body)
		}
	}
}
