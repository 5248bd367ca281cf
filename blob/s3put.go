package blob

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"
)

// s3Put makes S3 conditional creates one PutObject request from memory.
// gocloud's writer goes through the S3 transfer manager, which copies the
// body into freshly allocated part buffers, and hashes it with MD5 on the
// way (S3 no longer checks Content-MD5): for the objects Strata creates
// conditionally (manifests, WAL entries, shard states) that cost a fifth of
// a shard writer's CPU on MinIO. Put keeps gocloud's streaming upload.
type s3Put struct {
	client *s3.Client
	bucket string
	prefix string // ends in "/" when set
}

// plain reports whether gocloud stores key under its own name: it escapes
// control characters and "../", and an object written here under another
// name would not be found through it.
func plain(key string) bool {
	for i := 0; i < len(key); i++ {
		if key[i] < 32 {
			return false
		}
	}
	return !strings.Contains(key, "../")
}

// putIfAbsent creates key with data unless it exists (If-None-Match: *).
func (p *s3Put) putIfAbsent(ctx context.Context, key string, data []byte) error {
	_, err := p.client.PutObject(ctx, &s3.PutObjectInput{
		Bucket:        aws.String(p.bucket),
		Key:           aws.String(p.prefix + key),
		Body:          bytes.NewReader(data),
		ContentLength: aws.Int64(int64(len(data))),
		ContentType:   aws.String("application/octet-stream"),
		IfNoneMatch:   aws.String("*"),
	})
	if err == nil {
		return nil
	}
	// 412 Precondition Failed: the key exists. (gocloud maps it for its
	// own requests; here it comes from the SDK as it is.)
	var ae smithy.APIError
	if errors.As(err, &ae) && ae.ErrorCode() == "PreconditionFailed" {
		return newError("put-if-absent", key, ErrExists, err)
	}
	if status, ok := httpStatus(err, errors.As); ok && status == http.StatusPreconditionFailed {
		return newError("put-if-absent", key, ErrExists, err)
	}
	return classify("put-if-absent", key, err, errors.As)
}
