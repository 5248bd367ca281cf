// Package gcs is Strata's driver for Google Cloud Storage: importing it
// makes blob.Open (and every Strata program that opens buckets by URL)
// open gs://bucket/prefix URLs, as gocloud.dev's gcsblob opens them, with
// a read timeout on each connection and a bound on each request's tries.
//
// It is a package of its own because the GCS client links gRPC,
// OpenTelemetry and protobuf registries whose initialization costs every
// program that links them about 15 ms and 10 MB at start-up: the strata
// command's table verbs (strata-engine) do not link it, strata-full,
// strata-compactor and strata-iceberg do.
package gcs

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"time"

	"cloud.google.com/go/storage"
	gcblob "gocloud.dev/blob"
	"gocloud.dev/blob/gcsblob"
	"gocloud.dev/gcp"
	"golang.org/x/oauth2/google"
	"google.golang.org/api/option"

	"github.com/stratadb/strata/blob"
)

func init() {
	blob.RegisterGCS(blob.Driver{Open: openGCS, BeforeWrite: boundGCSUploadRetries})
}

// Attempts is how many times the GCS client tries one request before
// its error reaches Strata (which has retries of its own, bounded by each
// operation's budget). The client's default is to retry for as long as
// the caller's context lives: a store answering 503 held an append, a
// commit or the compactor Job for good.
const Attempts = 3

// boundGCSUploadRetries is the BeforeWrite of every GCS upload. The
// client's attempt limit does not reach uploads, which retry until the
// context ends; the upload's object handle gets a retry rule of its own
// that gives up after Attempts failed requests.
func boundGCSUploadRetries(as func(any) bool) error {
	var obj **storage.ObjectHandle
	if !as(&obj) {
		return nil
	}
	failed := 0
	*obj = (*obj).Retryer(storage.WithErrorFunc(func(err error) bool {
		failed++
		return failed < Attempts && storage.ShouldRetry(err)
	}))
	return nil
}

// openGCS opens a gs:// bucket as gocloud's URL opener does (its query
// parameters, Application Default Credentials, STORAGE_EMULATOR_HOST),
// with a read timeout on its connections and Attempts tries per
// request. The read timeout applies to the JSON API; with grpc=true or
// zonal=true the gRPC client keeps its own.
func openGCS(ctx context.Context, u *url.URL, q url.Values, readTimeout time.Duration) (*gcblob.Bucket, error) {
	anonymous, err := blob.BoolParam(q, "anonymous")
	if err != nil {
		return nil, err
	}
	anonymous = anonymous || q.Get("access_id") == "-"
	grpc, err := blob.BoolParam(q, "grpc")
	if err != nil {
		return nil, err
	}
	zonal, err := blob.BoolParam(q, "zonal")
	if err != nil {
		return nil, err
	}
	emulator := os.Getenv("STORAGE_EMULATOR_HOST") != "" || os.Getenv("STORAGE_EMULATOR_HOST_GRPC") != ""

	var creds *google.Credentials
	var opts gcsblob.Options
	switch {
	case emulator || anonymous:
		// The emulator takes no credentials; the opener needs some.
		creds, err = google.CredentialsFromJSONWithType(ctx, []byte(`{"type": "service_account", "project_id": "emulator"}`), google.ServiceAccount)
	case q.Get("universe_domain") != "":
		creds, err = gcp.DefaultCredentialsWithParams(ctx, google.CredentialsParams{UniverseDomain: q.Get("universe_domain")})
	default:
		creds, err = gcp.DefaultCredentials(ctx)
	}
	if err != nil {
		return nil, blob.MissingCredentials(fmt.Errorf("no credentials for GCS (set GOOGLE_APPLICATION_CREDENTIALS, or anonymous=true for a public bucket): %w", err))
	}
	if !emulator && !anonymous {
		if ud, err := creds.GetUniverseDomain(); err == nil && ud != "" {
			opts.ClientOptions = append(opts.ClientOptions, option.WithUniverseDomain(ud))
		}
	}

	// A copy of the default transport, to dial through; a program that
	// replaced it with a RoundTripper of its own gets a fresh one.
	tr := &http.Transport{Proxy: http.ProxyFromEnvironment, ForceAttemptHTTP2: true}
	if dt, ok := http.DefaultTransport.(*http.Transport); ok {
		tr = dt.Clone()
	}
	if readTimeout > 0 {
		dial := tr.DialContext
		if dial == nil {
			dial = (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext
		}
		tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := dial(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			return &idleTimeoutConn{Conn: c, timeout: readTimeout}, nil
		}
	}
	client := gcp.NewAnonymousHTTPClient(tr)
	if !emulator && !anonymous {
		if client, err = gcp.NewHTTPClient(tr, creds.TokenSource); err != nil {
			return nil, err
		}
	}
	if !grpc && !zonal {
		// Last, so that it takes the place of the client gocloud picks
		// for the emulator and for anonymous access (both untimed).
		opts.ClientOptions = append(opts.ClientOptions, option.WithHTTPClient(&client.Client))
	}
	opener := &gcsblob.URLOpener{Client: client, TokenSource: gcp.CredentialsTokenSource(creds), Options: opts}
	gb, err := opener.OpenBucketURL(ctx, &url.URL{Scheme: u.Scheme, Host: u.Host, RawQuery: q.Encode()})
	if err != nil {
		return nil, err
	}
	var sc *storage.Client
	if gb.As(&sc) {
		sc.SetRetry(storage.WithMaxAttempts(Attempts))
	}
	return gb, nil
}

// idleTimeoutConn fails a read that waits longer than timeout for the
// next byte; every byte received starts the wait anew, so a slow transfer
// survives and a silent connection fails once.
type idleTimeoutConn struct {
	net.Conn
	timeout time.Duration
}

func (c *idleTimeoutConn) Read(p []byte) (int, error) {
	if err := c.Conn.SetReadDeadline(time.Now().Add(c.timeout)); err != nil {
		return 0, err
	}
	n, err := c.Conn.Read(p)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		err = fmt.Errorf("the store sent nothing for %v: %w", c.timeout, err)
	}
	return n, err
}
