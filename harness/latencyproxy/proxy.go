// Package latencyproxy is an HTTP proxy that holds every request for a
// round trip's worth of time before passing it to an object store (MinIO
// on 127.0.0.1, say), so that Strata and any other system pointed at it
// are measured under the same remote-store conditions in one run. It is a
// benchmarking tool, not part of the engine.
//
// Each request waits Delay ± Jitter (uniform) before it is forwarded; the
// response streams back as the store sends it, or no faster than
// BytesPerSecond when that is set (one connection to a remote store
// carries some tens to a hundred MB/s, however fast the store behind it). The Host header is passed
// through unchanged, so S3 signatures made for the proxy's address verify
// at the store.
//
// With LoseResponses set, that share of requests reach the target and are
// answered there, but the proxy drops the client's connection instead of
// passing the answer on: a lost response, as a load balancer's timeout or
// a dropped connection makes one, after the target acted.
//
// With WritesPerSecond or ReadsPerSecond set, requests beyond that rate
// (writes: PUT, POST, DELETE; reads: GET, HEAD, and so LIST) are answered
// 503 SlowDown with S3's XML error body, without reaching the target, as
// S3 answers a prefix asked more than it serves (3,500 writes and 5,500
// reads a second). Each rate is a token bucket holding a second's worth.
package latencyproxy

import (
	"errors"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httputil"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"
)

// Proxy forwards requests to Target after a delay.
type Proxy struct {
	Target         *url.URL
	Delay, Jitter  time.Duration
	BytesPerSecond int64 // each response body's rate; 0: as fast as the store sends it
	// LoseResponses is the share of answers dropped after the target
	// gave them (0 to 1), drawn from a generator seeded with Seed.
	LoseResponses float64
	Seed          uint64
	// BeforeAnswer, when set, is called with each request the target
	// answered and its status, before the answer is passed on: a test
	// kills its client there, after the target acted.
	BeforeAnswer func(r *http.Request, status int)
	// WritesPerSecond and ReadsPerSecond, when above 0, are the rates
	// beyond which requests are answered 503 SlowDown (set before the
	// first request).
	WritesPerSecond, ReadsPerSecond float64
	limitOnce                       sync.Once
	writes, reads                   *rate.Limiter
	throttled                       atomic.Int64
	requests                        atomic.Int64
	lost                            atomic.Int64
	rp                              *httputil.ReverseProxy
	mu                              sync.Mutex
	rng                             *rand.Rand
}

// errLost marks a response the proxy drops.
var errLost = errors.New("latencyproxy: response lost on purpose")

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
		ModifyResponse: func(resp *http.Response) error {
			if p.BeforeAnswer != nil {
				p.BeforeAnswer(resp.Request, resp.StatusCode)
			}
			if p.lose() {
				// The target acted and answered; the client never hears.
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				return errLost
			}
			if p.BytesPerSecond > 0 {
				resp.Body = &paced{ReadCloser: resp.Body, rate: p.BytesPerSecond, start: time.Now()}
			}
			return nil
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			if errors.Is(err, errLost) {
				p.lost.Add(1)
				panic(http.ErrAbortHandler) // the connection closes, no answer
			}
			w.WriteHeader(http.StatusBadGateway)
		},
		Transport: &http.Transport{MaxIdleConnsPerHost: 512, MaxConnsPerHost: 0, DisableCompression: true},
	}
	return p, nil
}

// lose draws whether to drop the next answer.
func (p *Proxy) lose() bool {
	if p.LoseResponses <= 0 {
		return false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.rng == nil {
		p.rng = rand.New(rand.NewPCG(p.Seed, p.Seed^0x9e3779b97f4a7c15))
	}
	return p.rng.Float64() < p.LoseResponses
}

// Lost returns how many answers the proxy dropped.
func (p *Proxy) Lost() int64 { return p.lost.Load() }

// Requests returns how many requests the proxy has passed.
func (p *Proxy) Requests() int64 { return p.requests.Load() }

// Throttled returns how many requests the proxy answered 503 SlowDown.
func (p *Proxy) Throttled() int64 { return p.throttled.Load() }

// allow reports whether r is within its kind's rate.
func (p *Proxy) allow(r *http.Request) bool {
	p.limitOnce.Do(func() {
		if p.WritesPerSecond > 0 {
			p.writes = rate.NewLimiter(rate.Limit(p.WritesPerSecond), max(1, int(p.WritesPerSecond)))
		}
		if p.ReadsPerSecond > 0 {
			p.reads = rate.NewLimiter(rate.Limit(p.ReadsPerSecond), max(1, int(p.ReadsPerSecond)))
		}
	})
	l := p.reads
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		l = p.writes
	}
	return l == nil || l.Allow()
}

// slowDown is S3's answer to a prefix asked beyond its rate.
const slowDown = `<?xml version="1.0" encoding="UTF-8"?>
<Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message></Error>`

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
	if !p.allow(r) {
		p.throttled.Add(1)
		w.Header().Set("Content-Type", "application/xml")
		w.WriteHeader(http.StatusServiceUnavailable)
		io.WriteString(w, slowDown)
		return
	}
	p.rp.ServeHTTP(w, r)
}

// paced reads a response body no faster than rate bytes a second.
type paced struct {
	io.ReadCloser
	rate  int64
	start time.Time
	n     int64 // bytes read so far
}

func (p *paced) Read(b []byte) (int, error) {
	n, err := p.ReadCloser.Read(b[:min(len(b), 64<<10)])
	p.n += int64(n)
	due := p.start.Add(time.Duration(float64(p.n) / float64(p.rate) * float64(time.Second)))
	if d := time.Until(due); d > 0 {
		time.Sleep(d)
	}
	return n, err
}
