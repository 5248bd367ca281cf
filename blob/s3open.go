package blob

import (
	"context"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	gcaws "gocloud.dev/aws"
	gcblob "gocloud.dev/blob"
	"gocloud.dev/blob/s3blob"
)

// boolParam reads a true/false query parameter (absent: false).
func boolParam(q url.Values, key string) (bool, error) {
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

// openS3 opens an s3:// bucket as gocloud's URL opener does, taking the
// same query parameters, with a read timeout on its connections.
func openS3(ctx context.Context, u *url.URL, q url.Values, readTimeout time.Duration) (*gcblob.Bucket, error) {
	var opts []func(*s3.Options)
	var bo s3blob.Options
	for _, key := range []string{"use_path_style", "s3ForcePathStyle", "disable_https", "accelerate"} {
		if q.Get(key) == "" {
			continue
		}
		on, err := boolParam(q, key)
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
