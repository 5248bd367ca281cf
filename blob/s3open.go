package blob

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	gcaws "gocloud.dev/aws"
	gcblob "gocloud.dev/blob"
	"gocloud.dev/blob/s3blob"
)

// BoolParam reads a true/false query parameter of a bucket URL (absent:
// false), for Open and its drivers.
func BoolParam(q url.Values, key string) (bool, error) {
	v := q.Get(key)
	if v == "" {
		return false, nil
	}
	on, err := strconv.ParseBool(v)
	if err != nil {
		return false, fmt.Errorf("%s=%q: want true or false", key, v)
	}
	return on, nil
}

// S3Attempts is how many times the S3 client tries one request that the
// store throttles (503 SlowDown) or fails with another 5xx, unless
// AWS_MAX_ATTEMPTS says otherwise; a request that got no answer (a
// dropped connection, the read timeout) is tried s3QuietAttempts times,
// as the SDK's default, so that a store gone silent fails a request in a
// few read timeouts.
//
// The SDK's defaults suit a call that a person retries; a fleet's appends,
// flushes and merges meet S3's per-prefix rate (3,500 writes and 5,500
// reads a second) as a matter of course. So Strata's client runs the SDK's
// adaptive mode — each process slows its own sending when the store
// throttles it, and speeds up again as throttling stops, so that a fleet
// converges on what the store serves instead of retrying in a storm — with
// jittered exponential backoff (1 s doubling, at most 20 s, for a
// throttle), and without the SDK's retry quota, which under sustained
// throttling fails every request of the process at once rather than
// backing off.
const S3Attempts = 10

const s3QuietAttempts = 3

// s3Retry is the S3 client's retry strategy (see S3Attempts): the SDK's
// adaptive mode, stopping early for an error the store did not answer.
type s3Retry struct{ *retry.AdaptiveMode }

func s3Retryer() aws.Retryer {
	attempts := S3Attempts
	if n, err := strconv.Atoi(os.Getenv("AWS_MAX_ATTEMPTS")); err == nil && n > 0 {
		attempts = n
	}
	return s3Retry{retry.NewAdaptiveMode(func(o *retry.AdaptiveModeOptions) {
		o.StandardOptions = append(o.StandardOptions, func(so *retry.StandardOptions) {
			so.MaxAttempts = attempts
			so.RateLimiter = ratelimit.None
		})
	})}
}

// RetryDelay ends the tries of a request the store did not answer after
// s3QuietAttempts, as the SDK ends any request's after MaxAttempts.
func (r s3Retry) RetryDelay(attempt int, err error) (time.Duration, error) {
	if attempt >= s3QuietAttempts && !storeAnswered(err) {
		return 0, &retry.MaxAttemptsError{Attempt: attempt, Err: err}
	}
	return r.AdaptiveMode.RetryDelay(attempt, err)
}

// storeAnswered reports whether err is the store's answer: a throttle, or
// a 5xx status.
func storeAnswered(err error) bool {
	if retry.IsErrorThrottles(retry.DefaultThrottles).IsErrorThrottle(err) == aws.TrueTernary {
		return true
	}
	var status interface{ HTTPStatusCode() int }
	return errors.As(err, &status) && status.HTTPStatusCode() >= 500
}

// openS3 opens an s3:// bucket as gocloud's URL opener does, taking the
// same query parameters, with a read timeout on its connections.
func openS3(ctx context.Context, u *url.URL, q url.Values, readTimeout time.Duration) (*gcblob.Bucket, error) {
	var opts []func(*s3.Options)
	var bo s3blob.Options
	for _, key := range []string{"use_path_style", "s3ForcePathStyle", "disable_https", "accelerate"} {
		if q.Get(key) == "" {
			continue
		}
		on, err := BoolParam(q, key)
		if err != nil {
			return nil, err
		}
		q.Del(key)
		switch key {
		case "disable_https":
			opts = append(opts, func(o *s3.Options) { o.EndpointOptions.DisableHTTPS = on })
		case "accelerate":
			opts = append(opts, func(o *s3.Options) { o.UseAccelerate = on })
		default:
			opts = append(opts, func(o *s3.Options) { o.UsePathStyle = on })
		}
	}
	if v := q.Get("ssetype"); v != "" {
		q.Del("ssetype")
		for _, t := range types.ServerSideEncryptionAes256.Values() {
			if strings.EqualFold(string(t), v) {
				bo.EncryptionType = t
			}
		}
		if bo.EncryptionType == "" {
			return nil, fmt.Errorf("ssetype=%q: want one of %v", v, types.ServerSideEncryptionAes256.Values())
		}
	}
	if v := q.Get("kmskeyid"); v != "" {
		q.Del("kmskeyid")
		bo.KMSEncryptionID = v
	}
	cfg, err := gcaws.V2ConfigFromURLParams(ctx, q)
	if err != nil {
		return nil, err
	}
	cfg.Retryer = s3Retryer
	if bc, ok := cfg.HTTPClient.(*awshttp.BuildableClient); ok {
		cfg.HTTPClient = bc.WithReadTimeout(readTimeout)
	} else if cfg.HTTPClient == nil {
		cfg.HTTPClient = awshttp.NewBuildableClient().WithReadTimeout(readTimeout)
	}
	// The upload manager takes the checksum setting from the bucket's
	// options, not from the client's.
	bo.RequestChecksumCalculation = cfg.RequestChecksumCalculation
	return s3blob.OpenBucket(ctx, s3.NewFromConfig(cfg, opts...), u.Host, &bo)
}
