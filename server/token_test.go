package server_test

import (
	"errors"
	"strings"
	"testing"

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
