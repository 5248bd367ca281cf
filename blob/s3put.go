package blob

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"
)

// s3Put makes S3 conditional creates, and uploads that end within
// smallPutLimit, one PutObject request from memory. gocloud's writer goes
// through the S3 transfer manager, which copies the body into freshly
// allocated part buffers, and hashes it with MD5 on the way (S3 no longer
// checks Content-MD5): for the objects Strata creates conditionally
// (manifests, WAL entries, shard states) that cost a fifth of a shard
// writer's CPU on MinIO, and a fragment of 200 rows (239 KB) cost the
// client 1.6 ms of CPU against 0.9 ms in one request. Longer uploads keep
// gocloud's streaming upload in parts.
type s3Put struct {
	client *s3.Client
	bucket string
	prefix string // ends in "/" when set
	// noBatch: the store answered a DeleteObjects "not implemented" (some
	// S3-compatible stores have no multi-object delete); deletes go one
	// object a request from then on.
	noBatch atomic.Bool
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
	err := p.put(ctx, key, data, true)
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

// put writes key with data in one PutObject request; ifAbsent adds
// If-None-Match: *. Errors are the SDK's, unclassified.
func (p *s3Put) put(ctx context.Context, key string, data []byte, ifAbsent bool) error {
	in := &s3.PutObjectInput{
		Bucket:        aws.String(p.bucket),
		Key:           aws.String(p.prefix + key),
		Body:          bytes.NewReader(data),
		ContentLength: aws.Int64(int64(len(data))),
		ContentType:   aws.String("application/octet-stream"),
	}
	if ifAbsent {
		in.IfNoneMatch = aws.String("*")
	}
	_, err := p.client.PutObject(ctx, in)
	return err
}

// smallPutLimit: an S3 upload that ends within this many bytes is sent as
// one PutObject from memory (a fragment of a few hundred rows); a longer
// one streams through gocloud's writer in parts. The transfer manager
// would buffer the same bytes for a single-part upload, growing its buffer
// by doubling from nothing and hashing it on the way.
const smallPutLimit = 4 << 20

var smallPutBuffers = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// readSmall reads r to its end if it ends within limit bytes: then whole
// is true and buf holds everything. Otherwise buf holds the first limit+1
// bytes read, to be sent ahead of the rest of r.
func readSmall(r io.Reader, buf *bytes.Buffer, limit int64) (whole bool, err error) {
	n, err := buf.ReadFrom(io.LimitReader(r, limit+1))
	if err != nil {
		return false, err
	}
	return n <= limit, nil
}
