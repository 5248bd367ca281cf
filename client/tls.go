package client

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
)

// TLSConfig returns the TLS configuration of a client of an https://
// server: the server's certificate verified against the CA certificates
// in caFile (PEM; "" for the system's roots), and, for a server that asks
// for one (mutual TLS), the client's own certificate and key.
func TLSConfig(caFile, certFile, keyFile string) (*tls.Config, error) {
	conf := &tls.Config{MinVersion: tls.VersionTLS12}
	if caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, fmt.Errorf("%w: CA file: %w", ErrInvalidOptions, err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("%w: CA file %s holds no PEM certificate", ErrInvalidOptions, caFile)
		}
		conf.RootCAs = pool
	}
	if (certFile == "") != (keyFile == "") {
		return nil, fmt.Errorf("%w: a client certificate needs its key, and a key its certificate", ErrInvalidOptions)
	}
	if certFile != "" {
		pair, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, fmt.Errorf("%w: client certificate %s and key %s: %w", ErrInvalidOptions, certFile, keyFile, err)
		}
		conf.Certificates = []tls.Certificate{pair}
	}
	return conf, nil
}

// httpClient is the HTTP client of options o: o.HTTP, or one with o.TLS.
func httpClient(o *Options) *http.Client {
	if o.HTTP != nil {
		return o.HTTP
	}
	if o.TLS == nil {
		return &http.Client{}
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = o.TLS.Clone()
	return &http.Client{Transport: tr}
}

// ErrTLS: the TLS handshake with the server failed: its certificate is
// not one the client trusts (the wrong CA, an expired certificate, a name
// it was not made for), or the server refused the client's. Sending again
// would fail again; the request is not retried.
var ErrTLS = errors.New("client: TLS")

// tlsFailure says what a failed TLS handshake means, or nil when err is
// not one.
func tlsFailure(err error) error {
	var ua x509.UnknownAuthorityError
	var ci x509.CertificateInvalidError
	var he x509.HostnameError
	var cv *tls.CertificateVerificationError
	switch {
	case errors.As(err, &ua):
		return fmt.Errorf("%w: the server's certificate is not signed by a CA this client trusts (give the server's CA: --ca FILE, ca=, Options.TLS): %w", ErrTLS, err)
	case errors.As(err, &he):
		return fmt.Errorf("%w: the server's certificate is not made for the name in the URL: %w", ErrTLS, err)
	case errors.As(err, &ci), errors.As(err, &cv):
		return fmt.Errorf("%w: the server's certificate is not valid: %w", ErrTLS, err)
	case err != nil && strings.Contains(err.Error(), "remote error: tls: "):
		// The server's alert (its type is not exported).
		return fmt.Errorf("%w: the server refused the handshake (a server with mutual TLS needs the client's certificate: --client-cert and --client-key, Options.TLS): %w", ErrTLS, err)
	}
	return nil
}
