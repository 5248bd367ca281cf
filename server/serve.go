package server

import (
	"context"
	"net"
	"net/http"
	"time"
)

// Starting a server: strata serve checks the bucket (CheckBucket), then
// serves the http.Server of HTTPServer on a Listener.

// CheckBucket opens the bucket URL the tables live under, as each table's
// bucket will be opened, and closes it: a URL that cannot be opened (an
// unknown scheme, no bucket name), a bucket that does not exist or cannot
// be reached, or missing credentials fail here, before the server listens,
// rather than at the first request.
func (s *Server) CheckBucket(ctx context.Context) error {
	b, err := s.opts.Open(ctx, s.opts.Bucket)
	if err != nil {
		return err
	}
	return b.Close()
}

// Listener wraps ln so that each connection it accepts is followed by the
// framing guard. Serve the listener with the http.Server of HTTPServer,
// whose ConnContext hands the guard to the handler.
func Listener(ln net.Listener) net.Listener { return guardedListener{Listener: ln} }

// MaxURLBytes bounds a request's URL (its filter=, columns=): a longer
// one is answered 414 (too_large) with a message naming the limit.
// MaxHeaderBytes bounds a request's head (its request line and headers)
// as the http.Server reads it; past it, the http.Server answers 431 and
// closes the connection.
const (
	MaxURLBytes    = 1 << 20
	MaxHeaderBytes = 4 << 20
)

// HTTPServer returns the http.Server that serves s on a listener wrapped by
// Listener: the handler, the header and idle timeouts, and the guard of
// each connection in its requests' context.
func (s *Server) HTTPServer() *http.Server {
	return &http.Server{
		Handler:           s.Handler(),
		ReadHeaderTimeout: 10 * time.Second,
		// Room for a request line past MaxURLBytes, so that such a
		// request is read whole and answered 414 with a message, not
		// cut off by the http.Server's own 431 and a reset connection.
		MaxHeaderBytes: MaxHeaderBytes,
		IdleTimeout:    2 * time.Minute,
		// Every request goes to the handler, which counts them: an
		// OPTIONS * answered by the http.Server itself would not be.
		DisableGeneralOptionsHandler: true,
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			if g, ok := c.(*guardedConn); ok {
				return context.WithValue(ctx, guardKey{}, g)
			}
			return ctx
		},
	}
}
