package blob

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"strings"
	"time"
	"unicode"

	"github.com/aws/aws-sdk-go-v2/service/s3"
	gcblob "gocloud.dev/blob"
	"gocloud.dev/blob/memblob"
)

// accessTimeout bounds Open's check that a cloud bucket can be reached.
const accessTimeout = 15 * time.Second

// DefaultReadTimeout is how long a request to S3 or GCS may wait for the
// store to send its next byte before it fails (retryable). Neither SDK
// sets one: a store that accepts a connection and never answers would
// hold an append, a commit or the compactor Job for good. read_timeout=
// in the bucket URL changes it (0: none). Each request's body is at most
// a few MiB (uploads go in parts), so a store that is merely slow keeps
// well inside it.
const DefaultReadTimeout = 60 * time.Second

// ErrBadURL is the kind of error Open returns for a URL it cannot use.
var ErrBadURL = errors.New("bad bucket URL")

// Open opens the bucket a URL names. A table lives under the URL's path,
// so several tables can share one bucket.
//
//	mem://                 a fresh in-memory bucket (each Open is a new one)
//	file:///abs/path       a local folder (created if missing)
//	file://./rel/path      a local folder relative to the working directory
//	/abs/path, ./rel/path  the same, without the scheme
//	s3://bucket/prefix?endpoint=http://127.0.0.1:9000&region=us-east-1
//	gs://bucket/prefix     GCS, in a program that imports blob/gcs;
//	                       STORAGE_EMULATOR_HOST points it at an emulator
//
// Any other scheme is ErrBadURL, naming these; so is a path that starts
// like a URL without "//" ("s3:/b": ./s3:/b is the folder) or that holds a
// control character.
//
// For s3, the query takes gocloud.dev's s3blob parameters (endpoint,
// region, use_path_style, disable_https, profile, …); when endpoint is
// given, use_path_style defaults to true, as MinIO and most S3-compatible
// servers expect; response_checksum_validation defaults to when_required.
// Credentials come from the standard AWS variables and files. For gs (the
// driver registered by package blob/gcs; without it, ErrBadURL naming
// it), the query takes gocloud.dev's gcsblob parameters (anonymous, universe_domain,
// …), credentials are Application Default Credentials, and each request is
// tried gcs.Attempts times. For both, read_timeout (Strata's own) bounds how
// long a request waits for the store's next byte (DefaultReadTimeout; 0:
// forever). The bucket must exist: Open checks that it can be reached.
//
// The returned bucket counts its requests (see StatsOf).
func Open(ctx context.Context, rawURL string) (Bucket, error) {
	b, err := openRaw(ctx, rawURL)
	if err != nil {
		return nil, err
	}
	return NewCounted(b), nil
}

func openRaw(ctx context.Context, rawURL string) (Bucket, error) {
	bad := func(format string, args ...any) error {
		return newError("open", rawURL, ErrBadURL, fmt.Errorf(format, args...))
	}
	if rawURL == "" {
		return nil, bad("empty URL")
	}
	if !strings.Contains(rawURL, "://") {
		// A path. One that starts like a URL is a mistyped one ("s3:/b",
		// "gs:bucket"), not a folder to create in the working directory.
		if scheme, _, ok := strings.Cut(rawURL, ":"); ok && len(scheme) > 1 && isScheme(scheme) {
			return nil, bad("%q starts with the scheme %q but lacks \"//\"; want %s://…, or ./%s for a folder", rawURL, scheme, scheme, rawURL)
		}
		if i := strings.IndexFunc(rawURL, unicode.IsControl); i >= 0 {
			return nil, bad("the path holds a control character at byte %d", i)
		}
		return OpenFile(rawURL)
	}
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, bad("%v", err)
	}
	prefix := strings.Trim(u.Path, "/")
	switch u.Scheme {
	case "file":
		dir := u.Path
		if u.Host != "" {
			dir = u.Host + u.Path // file://./rel/path
		}
		if dir == "" {
			return nil, bad("file URL without a path; want file:///abs/path or file://./rel/path")
		}
		return OpenFile(filepath.FromSlash(dir))
	case "mem":
		prefix = strings.Trim(u.Host+u.Path, "/")
		return withPrefix(rawURL, memblob.OpenBucket(nil), prefix)
	case "s3", "gs":
		if u.Host == "" {
			return nil, bad("no bucket name; want %s://bucket/prefix", u.Scheme)
		}
		q := u.Query()
		if u.Scheme == "s3" {
			if q.Get("endpoint") != "" && q.Get("use_path_style") == "" {
				q.Set("use_path_style", "true")
			}
			// Ranged reads carry no checksum to validate; asking the SDK
			// to try only logs a warning per read.
			if q.Get("response_checksum_validation") == "" {
				q.Set("response_checksum_validation", "when_required")
			}
		}
		readTimeout := DefaultReadTimeout
		if v := q.Get("read_timeout"); v != "" {
			d, err := time.ParseDuration(v)
			if err != nil || d < 0 {
				return nil, bad("read_timeout=%q: want a duration such as 30s (0: none)", v)
			}
			readTimeout = d
			q.Del("read_timeout")
		}
		var gb *gcblob.Bucket
		var beforeWrite func(as func(any) bool) error
		if u.Scheme == "s3" {
			gb, err = openS3(ctx, u, q, readTimeout)
		} else {
			d, ok := gcsDriver()
			if !ok {
				return nil, bad("%s", noDriver)
			}
			gb, err = d.Open(ctx, u, q, readTimeout)
			beforeWrite = d.BeforeWrite
		}
		if errors.As(err, new(noCredentials)) {
			return nil, newError("open", rawURL, ErrPermanent, err)
		}
		if err != nil {
			return nil, bad("%v", err)
		}
		if err := checkAccessible(ctx, rawURL, gb); err != nil {
			gb.Close()
			return nil, err
		}
		b, err := withPrefix(rawURL, gb, prefix)
		if err != nil {
			return nil, err
		}
		b.(*cloudBucket).beforeWrite = beforeWrite
		var client *s3.Client
		if u.Scheme == "s3" && gb.As(&client) {
			put := &s3Put{client: client, bucket: u.Host}
			if prefix != "" {
				put.prefix = prefix + "/"
			}
			b.(*cloudBucket).s3 = put
		}
		return b, nil
	default:
		return nil, bad("unknown scheme %q; want mem, file, s3 or gs", u.Scheme)
	}
}

// isScheme: a URL scheme as RFC 3986 writes it, a letter and then letters,
// digits, '+', '-' or '.'.
func isScheme(s string) bool {
	for i, r := range s {
		letter := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z'
		if !letter && (i == 0 || !(r >= '0' && r <= '9' || r == '+' || r == '-' || r == '.')) {
			return false
		}
	}
	return s != ""
}

func withPrefix(rawURL string, gb *gcblob.Bucket, prefix string) (Bucket, error) {
	if prefix != "" {
		if err := checkPrefix(prefix + "/"); err != nil {
			gb.Close()
			return nil, newError("open", rawURL, ErrBadURL, err)
		}
		gb = gcblob.PrefixedBucket(gb, prefix+"/")
	}
	return FromGoCloud(gb), nil
}

// checkAccessible makes one request so that a missing bucket, a wrong
// endpoint or missing credentials fail at Open with a clear error rather
// than at the first commit.
func checkAccessible(ctx context.Context, rawURL string, gb *gcblob.Bucket) error {
	// An unreachable endpoint fails here within the timeout, not after an
	// SDK's retries have run for minutes (the GCS client's do).
	ctx, cancel := context.WithTimeout(ctx, accessTimeout)
	defer cancel()
	ok, err := gb.IsAccessible(ctx)
	if err == nil && ok {
		return nil
	}
	if err == nil {
		return newError("open", rawURL, ErrPermanent, errors.New("bucket does not exist or is not accessible with these credentials"))
	}
	if errors.Is(err, context.DeadlineExceeded) && ctx.Err() != nil {
		return newError("open", rawURL, ErrRetryable, fmt.Errorf("the store did not answer within %v (is the endpoint right, and reachable?)", accessTimeout))
	}
	if why := setupMistake(rawURL, err); why != "" {
		return newError("open", rawURL, ErrPermanent, fmt.Errorf("%s: %w", why, err))
	}
	return classify("open", rawURL, err, gb.ErrorAs)
}

// setupMistake names the set-up mistake behind err, an open's first
// request to the store failing before it reached the store, and its
// remedy ("" when err is not one): no region for S3, no credentials.
func setupMistake(rawURL string, err error) string {
	msg := err.Error()
	s3 := strings.HasPrefix(rawURL, "s3://")
	switch {
	case s3 && (strings.Contains(msg, "Invalid region") || strings.Contains(msg, "region is required") || strings.Contains(msg, "A region must be set")):
		return "no AWS region: set AWS_REGION (e.g. AWS_REGION=us-east-1), or add region= to the URL (s3://bucket/table?region=us-east-1)"
	case s3 && strings.Contains(msg, "get credentials"):
		return "no AWS credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or AWS_PROFILE for a profile in ~/.aws/credentials)"
	case strings.Contains(msg, "could not find default credentials") || strings.Contains(msg, "get credentials"):
		return "no credentials: set GOOGLE_APPLICATION_CREDENTIALS to a service-account key file, or run gcloud auth application-default login"
	}
	return ""
}
