// Package latencyproxy is an HTTP proxy that holds every request for a
// round trip's worth of time before passing it to an object store (MinIO
// on 127.0.0.1, say), so that Strata and any other system pointed at it
// are measured under the same remote-store conditions in one run. It is a
// benchmarking tool, not part of the engine.
//
// Each request waits Delay ± Jitter (uniform) before it is forwarded; the
// response streams back as the store sends it. The Host header is passed
// through unchanged, so S3 signatures made for the proxy's address verify
// at the store.
package latencyproxy

import (
	"math/rand/v2"
	"net/http"
	"net/http/httputil"
	"net/url"
	"sync/atomic"
	"time"
)

// Proxy forwards requests to Target after a delay.
type Proxy struct {
	Target        *url.URL
	Delay, Jitter time.Duration
	requests      atomic.Int64
	rp            *httputil.ReverseProxy
}

// New returns a proxy to target ("http://127.0.0.1:9000").
func New(target string, delay, jitter time.Duration) (*Proxy, error) {
	u, err := url.Parse(target)
	if err != nil {
		return nil, err
	}
	p := &Proxy{Target: u, Delay: delay, Jitter: jitter}
	p.rp = &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.Out.URL.Scheme, r.Out.URL.Host = u.Scheme, u.Host
			r.Out.Host = r.In.Host // signed by the client for the proxy's address
		},
		FlushInterval: -1,
		Transport:     &http.Transport{MaxIdleConnsPerHost: 512, MaxConnsPerHost: 0, DisableCompression: true},
	}
	return p, nil
}

// Requests returns how many requests the proxy has passed.
func (p *Proxy) Requests() int64 { return p.requests.Load() }

// wait is the delay of one request.
func (p *Proxy) wait() time.Duration {
	d := p.Delay
	if p.Jitter > 0 {
		d += time.Duration(rand.Int64N(int64(2*p.Jitter)+1)) - p.Jitter
	}
	return max(d, 0)
}

// ServeHTTP implements http.Handler.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p.requests.Add(1)
	t := time.NewTimer(p.wait())
	select {
	case <-t.C:
	case <-r.Context().Done():
		t.Stop()
		return
	}
	p.rp.ServeHTTP(w, r)
}
