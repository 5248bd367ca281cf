package server_test

import (
	"crypto/tls"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stratadb/strata/client"
	"github.com/stratadb/strata/harness/rollouts"
	"github.com/stratadb/strata/harness/testcert"
	"github.com/stratadb/strata/harness/testenv"
	"github.com/stratadb/strata/server"
)

// serveTLS serves the tables under root over TLS with files, as strata
// serve does, and returns the server's https:// URL.
func serveTLS(t *testing.T, root string, files server.TLSFiles, opts server.Options) string {
	t.Helper()
	opts.Bucket, opts.Instance = root, "tls"
	opts.Log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	srv, err := server.New(&opts)
	if err != nil {
		t.Fatal(err)
	}
	conf, err := server.TLSConfig(files, nil)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := srv.HTTPServer()
	go func() { _ = hs.Serve(server.TLSListener(ln, conf, opts.Log)) }()
	t.Cleanup(func() {
		_ = hs.Close()
		_ = srv.Shutdown(ctx)
	})
	return "https://" + ln.Addr().String()
}

func tlsClient(t *testing.T, url, ca, cert, key string) *client.Client {
	t.Helper()
	conf, err := client.TLSConfig(ca, cert, key)
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(url, &client.Options{TLS: conf})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// Over TLS with a CA the test made: a client that trusts it appends and
// scans; plain HTTP to the port gets a 400 that says to use https; a
// client trusting another CA is refused at once (not retried), naming
// the CA as the cause.
func TestTLS(t *testing.T) {
	certs, err := testcert.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	url := serveTLS(t, "file://"+t.TempDir(), server.TLSFiles{Cert: certs.Cert, Key: certs.Key}, server.Options{})
	c := tlsClient(t, url, certs.CA, "", "")
	if _, err := c.CreateTable(ctx, "r", rollouts.Schema); err != nil {
		t.Fatal(err)
	}
	rec := rollouts.Batch(testenv.Allocator(t), 1, 0, 0, 100)
	defer rec.Release()
	if n, err := c.Append(ctx, "r", rec); err != nil || n != 100 {
		t.Fatalf("append over TLS: %d %v", n, err)
	}
	recs, err := c.Scan(ctx, "r", client.ScanOptions{Columns: []string{"id"}})
	if got := ids(t, recs); err != nil || len(got) != 100 {
		t.Fatalf("scan over TLS: %d ids, %v", len(got), err)
	}
	plain, err := client.New("http"+strings.TrimPrefix(url, "https"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := plain.Describe(ctx, "r"); !client.IsStatus(err, http.StatusBadRequest) || !strings.Contains(err.Error(), "serves HTTPS") {
		t.Fatalf("plain HTTP to the TLS port: %v", err)
	}
	// Any method, any case, a proxy's absolute form: answered in words.
	for _, line := range []string{"get / HTTP/1.1", "CONNECT 127.0.0.1:1 HTTP/1.1", "GET http://x/ HTTP/1.1", "OPTIONS * HTTP/1.1"} {
		conn, err := net.Dial("tcp", strings.TrimPrefix(url, "https://"))
		if err != nil {
			t.Fatal(err)
		}
		_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := conn.Write([]byte(line + "\r\nHost: x\r\n\r\n")); err != nil {
			t.Fatal(err)
		}
		answer, _ := io.ReadAll(conn)
		conn.Close()
		if !strings.Contains(string(answer), "400 Bad Request") || !strings.Contains(string(answer), "serves HTTPS") {
			t.Errorf("%q to the TLS port: %q", line, answer)
		}
	}
	start := time.Now()
	wrong := tlsClient(t, url, certs.OtherCA, "", "")
	if _, err := wrong.Append(ctx, "r", rec); !errors.Is(err, client.ErrTLS) || !strings.Contains(err.Error(), "not signed by a CA this client trusts") {
		t.Fatalf("a client trusting another CA: %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("the refused handshake was retried for %v", d)
	}
}

// With a client CA, the server asks each client for its certificate: one
// without is refused, naming what it lacks; one the CA signed is served.
func TestMutualTLS(t *testing.T) {
	certs, err := testcert.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	url := serveTLS(t, "file://"+t.TempDir(), server.TLSFiles{Cert: certs.Cert, Key: certs.Key, ClientCA: certs.CA}, server.Options{})
	if _, err := tlsClient(t, url, certs.CA, "", "").Tables(ctx); !errors.Is(err, client.ErrTLS) || !strings.Contains(err.Error(), "needs the client's certificate") {
		t.Fatalf("no client certificate: %v", err)
	}
	if _, err := tlsClient(t, url, certs.CA, certs.ClientCert, certs.ClientKey).Tables(ctx); err != nil {
		t.Fatalf("with the client certificate: %v", err)
	}
}

// The server's certificate renewed in place while a client streams a
// scan and others keep asking: no request fails, and new connections
// get the new certificate.
func TestCertificateRenewedUnderLoad(t *testing.T) {
	certs, err := testcert.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	url := serveTLS(t, "file://"+t.TempDir(), server.TLSFiles{Cert: certs.Cert, Key: certs.Key}, server.Options{})
	c := tlsClient(t, url, certs.CA, "", "")
	if _, err := c.CreateTable(ctx, "r", rollouts.Schema); err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		rec := rollouts.Batch(testenv.Allocator(t), 1, 0, int64(i*500), 500)
		_, err := c.Append(ctx, "r", rec)
		rec.Release()
		if err != nil {
			t.Fatal(err)
		}
		if err := c.CheckpointLSM(ctx, "r"); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	var failed atomic.Int64
	var requests atomic.Int64
	stop := make(chan struct{})
	renewed := make(chan struct{})
	// A scan that reads one batch, waits for the renewal, then reads on.
	wg.Add(1)
	go func() {
		defer wg.Done()
		rows, first := int64(0), true
		for rec, err := range c.ScanIter(ctx, "r", client.ScanOptions{Columns: []string{"id"}}) {
			if err != nil {
				t.Errorf("the streamed scan: %v", err)
				failed.Add(1)
				return
			}
			rows += rec.NumRows()
			if first {
				first = false
				<-renewed
			}
		}
		if rows != 10_000 {
			t.Errorf("the streamed scan read %d rows, want 10000", rows)
		}
	}()
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Each request on a new connection: a handshake each.
			conf, _ := client.TLSConfig(certs.CA, "", "")
			tr := &http.Transport{TLSClientConfig: conf, DisableKeepAlives: true}
			fresh, _ := client.New(url, &client.Options{HTTP: &http.Client{Transport: tr}})
			for {
				select {
				case <-stop:
					return
				default:
				}
				requests.Add(1)
				if _, err := fresh.Describe(ctx, "r"); err != nil {
					t.Errorf("a request across the renewal: %v", err)
					failed.Add(1)
				}
			}
		}()
	}
	time.Sleep(200 * time.Millisecond)
	serial, err := certs.Renew()
	if err != nil {
		t.Fatal(err)
	}
	// The files are looked at once a second: the new certificate is
	// served within two.
	conf, _ := client.TLSConfig(certs.CA, "", "")
	deadline := time.Now().Add(5 * time.Second)
	for {
		conn, err := tls.Dial("tcp", strings.TrimPrefix(url, "https://"), conf)
		if err != nil {
			t.Fatal(err)
		}
		got := conn.ConnectionState().PeerCertificates[0].SerialNumber
		conn.Close()
		if got.Cmp(serial) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the server still serves certificate %v, 5 s after the renewal to %v", got, serial)
		}
		time.Sleep(50 * time.Millisecond)
	}
	close(renewed)
	time.Sleep(200 * time.Millisecond)
	close(stop)
	wg.Wait()
	if failed.Load() > 0 || requests.Load() < 10 {
		t.Fatalf("%d of %d requests failed across the renewal", failed.Load(), requests.Load())
	}
}
