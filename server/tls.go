package server

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"sync"
	"time"
)

// TLS. strata serve --tls-cert and --tls-key serve HTTPS; the files are
// read again when they change (as cert-manager renews a certificate in a
// mounted Secret), so that a renewal needs no restart: each new
// connection's handshake looks at the files at most once a second, and a
// pair that does not load (a certificate written before its key) leaves
// the pair before in use until it does. --client-ca asks every client for
// a certificate signed by that CA (mutual TLS), also read again on change.
// A plain HTTP request to the TLS port is answered 400 with a message
// saying so. Connections are HTTP/1.1, each followed by the framing guard
// over its plaintext.

// TLSFiles are the files of a TLS server: its certificate chain and key
// (PEM), and optionally the CA that signs its clients' certificates.
type TLSFiles struct {
	Cert, Key, ClientCA string
}

// certCheckEvery is how often the files are looked at for a change.
const certCheckEvery = time.Second

type tlsState struct {
	files   TLSFiles
	mu      sync.Mutex
	checked time.Time
	stamps  [3]fileStamp
	conf    *tls.Config // the configuration of the files as last loaded
	report  func(error)
}

// TLSConfig loads the files and returns the configuration a TLS listener
// serves with; report (nil: none) hears of each reload, nil for one that
// took and the error of one that did not.
func TLSConfig(files TLSFiles, report func(error)) (*tls.Config, error) {
	if files.Cert == "" || files.Key == "" {
		return nil, errors.New("TLS needs both a certificate and a key file")
	}
	if report == nil {
		report = func(error) {}
	}
	st := &tlsState{files: files, report: report}
	conf, stamps, err := st.load()
	if err != nil {
		return nil, err
	}
	st.conf, st.stamps, st.checked = conf, stamps, time.Now()
	return &tls.Config{
		MinVersion:         tls.VersionTLS12,
		NextProtos:         []string{"http/1.1"},
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) { return st.current(), nil },
	}, nil
}

// fileStamp tells a file's change: its modification time and size.
type fileStamp struct {
	mod  time.Time
	size int64
}

func stampOf(path string) fileStamp {
	if path == "" {
		return fileStamp{}
	}
	fi, err := os.Stat(path)
	if err != nil {
		return fileStamp{}
	}
	return fileStamp{fi.ModTime(), fi.Size()}
}

func (st *tlsState) stampsNow() [3]fileStamp {
	return [3]fileStamp{stampOf(st.files.Cert), stampOf(st.files.Key), stampOf(st.files.ClientCA)}
}

// load reads the files into a configuration.
func (st *tlsState) load() (*tls.Config, [3]fileStamp, error) {
	stamps := st.stampsNow()
	pair, err := tls.LoadX509KeyPair(st.files.Cert, st.files.Key)
	if err != nil {
		return nil, stamps, fmt.Errorf("TLS certificate %s and key %s: %w", st.files.Cert, st.files.Key, err)
	}
	conf := &tls.Config{MinVersion: tls.VersionTLS12, NextProtos: []string{"http/1.1"}, Certificates: []tls.Certificate{pair}}
	if st.files.ClientCA != "" {
		pem, err := os.ReadFile(st.files.ClientCA)
		if err != nil {
			return nil, stamps, fmt.Errorf("client CA: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, stamps, fmt.Errorf("client CA %s: no PEM certificate in it", st.files.ClientCA)
		}
		conf.ClientCAs, conf.ClientAuth = pool, tls.RequireAndVerifyClientCert
	}
	return conf, stamps, nil
}

// current is the configuration for a new connection: the files loaded
// again when they changed since they were last looked at.
func (st *tlsState) current() *tls.Config {
	st.mu.Lock()
	defer st.mu.Unlock()
	if time.Since(st.checked) < certCheckEvery {
		return st.conf
	}
	st.checked = time.Now()
	if st.stampsNow() == st.stamps {
		return st.conf
	}
	conf, stamps, err := st.load()
	st.stamps = stamps // a pair that failed is tried again when it changes again
	if err != nil {
		st.report(err)
		return st.conf
	}
	st.conf = conf
	st.report(nil)
	return conf
}

// TLSListener serves TLS with conf on ln, each connection followed by
// the framing guard (as Listener's): serve it with HTTPServer's server. A
// handshake that fails (a client's certificate refused, an old protocol,
// a client that trusts another CA) is a warning in log (nil: none).
func TLSListener(ln net.Listener, conf *tls.Config, log *slog.Logger) net.Listener {
	return guardedListener{Listener: ln, tls: conf, log: log}
}

// plainToTLS is the answer to a plain HTTP request on the TLS port.
const plainToTLS = "HTTP/1.0 400 Bad Request\r\nContent-Type: text/plain\r\nConnection: close\r\n\r\nThis port serves HTTPS: the client sent plain HTTP (use an https:// URL).\n"

// tlsConn is a server's TLS connection that answers a plain HTTP request
// in words, then closes.
type tlsConn struct {
	*tls.Conn
	raw  net.Conn
	log  *slog.Logger
	once sync.Once
}

func (c *tlsConn) Read(p []byte) (int, error) {
	shook := c.Conn.ConnectionState().HandshakeComplete
	n, err := c.Conn.Read(p)
	var rhe tls.RecordHeaderError
	if err != nil && errors.As(err, &rhe) && rhe.Conn != nil && looksLikeHTTP(rhe.RecordHeader) {
		c.once.Do(func() {
			_ = c.raw.SetWriteDeadline(time.Now().Add(5 * time.Second))
			_, _ = io.WriteString(c.raw, plainToTLS)
		})
		return 0, io.EOF
	}
	if err != nil && !shook && !c.Conn.ConnectionState().HandshakeComplete && c.log != nil && !errors.Is(err, io.EOF) {
		c.once.Do(func() {
			c.log.Warn("TLS handshake failed", "remote", c.raw.RemoteAddr().String(), "error", err.Error())
		})
	}
	return n, err
}

// looksLikeHTTP tells a plain HTTP request's first bytes (a method, in
// letters, then a space or its path) from a TLS record's.
func looksLikeHTTP(hdr [5]byte) bool {
	for i, b := range hdr {
		letter := b >= 'A' && b <= 'Z' || b >= 'a' && b <= 'z'
		if i == 0 && !letter || !letter && b != ' ' && b != '/' && b != '*' {
			return false
		}
	}
	return true
}
