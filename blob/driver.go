package blob

import (
	"context"
	"net/url"
	"sync"
	"time"

	gcblob "gocloud.dev/blob"
)

// Driver opens the buckets of gs:// URLs, which package blob does not
// carry itself (package blob/gcs does): the GCS client links gRPC,
// OpenTelemetry and protobuf registries that cost every program linking
// them about 15 ms and 10 MB at start-up, so only the programs that open
// gs:// URLs import it.
type Driver struct {
	// Open opens the bucket u names, with the URL's query q (read_timeout
	// taken out) and the read timeout Open was given. An error it wraps
	// with MissingCredentials is permanent; any other is ErrBadURL.
	Open func(ctx context.Context, u *url.URL, q url.Values, readTimeout time.Duration) (*gcblob.Bucket, error)
	// BeforeWrite, when set, tunes each upload's writer (gocloud's
	// WriterOptions.BeforeWrite).
	BeforeWrite func(as func(any) bool) error
}

var (
	gcsMu sync.RWMutex
	gcs   *Driver
)

// RegisterGCS makes Open use d for gs:// URLs. Package blob/gcs registers
// its driver so in its init, as database/sql's drivers do; registering a
// second, or one without an Open, is a programming error and panics.
func RegisterGCS(d Driver) {
	gcsMu.Lock()
	defer gcsMu.Unlock()
	if gcs != nil || d.Open == nil {
		panic("blob: RegisterGCS: one driver, with an Open")
	}
	gcs = &d
}

func gcsDriver() (Driver, bool) {
	gcsMu.RLock()
	defer gcsMu.RUnlock()
	if gcs == nil {
		return Driver{}, false
	}
	return *gcs, true
}

// noDriver is why a gs:// URL does not open in a program without the GCS
// driver.
const noDriver = "this program does not link the GCS driver: the strata command opens gs:// URLs through strata-full, and a Go program imports github.com/stratadb/strata/blob/gcs"

// noCredentials: the opener found no credentials; Open reports it as
// permanent, not as a bad URL.
type noCredentials struct{ error }

func (e noCredentials) Unwrap() error { return e.error }

// MissingCredentials marks a driver's error as "no credentials were
// found": Open reports it as permanent (retrying will not find them), not
// as a bad URL.
func MissingCredentials(err error) error { return noCredentials{err} }
