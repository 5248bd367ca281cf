package servecmd

import (
	"strings"
	"testing"
)

// A token of blanks only is no token a client can send (HTTP drops a
// header value's blanks): serve refuses it as a usage error, from --token
// or STRATA_TOKEN, before it listens anywhere.
func TestServeRefusesABlankToken(t *testing.T) {
	t.Setenv("STRATA_TOKEN", "")
	code, _, errOut := run(t, nil, "serve", "--bucket", "file://"+t.TempDir(), "--listen", "0.0.0.0:0", "--token", " ")
	if code != 2 || !strings.Contains(errOut, "--token/STRATA_TOKEN: the token is blank") {
		t.Fatalf("--token ' ': exit %d: %s", code, errOut)
	}
	t.Setenv("STRATA_TOKEN", "\t ")
	code, _, errOut = run(t, nil, "serve", "--bucket", "file://"+t.TempDir(), "--listen", "0.0.0.0:0")
	if code != 2 || !strings.Contains(errOut, "the token is blank") {
		t.Fatalf("STRATA_TOKEN of blanks: exit %d: %s", code, errOut)
	}
	t.Setenv("STRATA_TOKEN", "secret ")
	code, _, errOut = run(t, nil, "serve", "--bucket", "file://"+t.TempDir(), "--listen", "127.0.0.1:0")
	if code != 2 || !strings.Contains(errOut, "ends with whitespace") {
		t.Fatalf("STRATA_TOKEN with a trailing blank: exit %d: %s", code, errOut)
	}
}

// Beyond loopback, serve wants TLS and a way to tell clients apart;
// TLS wants both of its files.
func TestServeBeyondLoopbackWantsTLS(t *testing.T) {
	t.Setenv("STRATA_TOKEN", "")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--listen", "0.0.0.0:0", "--token", "s3cret"}, "plain HTTP beyond loopback"},
		{[]string{"--listen", "0.0.0.0:0", "--tls-cert", "c.pem", "--tls-key", "k.pem"}, "no token configured"},
		{[]string{"--listen", "127.0.0.1:0", "--tls-cert", "c.pem"}, "--tls-cert and --tls-key together"},
		{[]string{"--listen", "127.0.0.1:0", "--client-ca", "ca.pem"}, "--tls-cert and --tls-key together"},
		{[]string{"--listen", "127.0.0.1:0", "--tls-cert", "missing.pem", "--tls-key", "missing-key.pem"}, "missing.pem"},
		{[]string{"--listen", "127.0.0.1:0", "--tokens", "missing-tokens"}, "--tokens: tokens file"},
	} {
		args := append([]string{"serve", "--bucket", "file://" + t.TempDir()}, tc.args...)
		code, _, errOut := run(t, nil, args...)
		if code != 2 || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: exit %d: %s, want 2 and %q", tc.args, code, errOut, tc.want)
		}
	}
}
