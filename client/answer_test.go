package client_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stratadb/strata/api"
	"github.com/stratadb/strata/client"
	"github.com/stratadb/strata/harness/testenv"
	"github.com/stratadb/strata/internal/ipcguard"
)

// A server's answer whose first message claims a 32 GiB body is an error
// naming the refusal: arrow-go's reader, unguarded, allocates what a
// message claims.
func TestAnAnswerClaimingAHugeBodyIsRefused(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", api.ArrowStream)
		w.Write(testenv.SchemaMessageClaimingBody(32 << 30))
	}))
	defer srv.Close()
	scan := func(opts *client.Options) error {
		c, err := client.New(srv.URL, opts)
		if err != nil {
			t.Fatal(err)
		}
		for _, err := range c.ScanIter(context.Background(), "t", client.ScanOptions{}) {
			if err != nil {
				return err
			}
		}
		return errors.New("no error")
	}
	if err := scan(nil); !errors.Is(err, ipcguard.ErrRefused) {
		t.Fatalf("an answer claiming a 32 GiB body: %v, want it refused", err)
	}
}
