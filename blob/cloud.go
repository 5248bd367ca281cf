package blob

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"

	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/smithy-go"
	gcblob "gocloud.dev/blob"
	"gocloud.dev/gcerrors"
	"google.golang.org/api/googleapi"
)

const cloudDefaultPageSize = 1000

// cloudBucket adapts a gocloud.dev bucket (memory, S3, GCS). Conditional
// creates use the provider's precondition (S3 If-None-Match: *, GCS
// ifGenerationMatch=0), which gocloud exposes as WriterOptions.IfNotExist.
type cloudBucket struct {
	b  *gcblob.Bucket
	s3 *s3Put // S3 only: conditional creates in one PutObject
	// beforeWrite, when set, tunes each upload's writer (GCS: how long it
	// retries on its own).
	beforeWrite func(as func(any) bool) error
}

// FromGoCloud adapts an open gocloud.dev bucket. The adapter takes
// ownership: closing it closes b.
func FromGoCloud(b *gcblob.Bucket) Bucket { return &cloudBucket{b: b} }

func (c *cloudBucket) classify(op, key string, err error) error {
	return classify(op, key, err, c.b.ErrorAs)
}

// classify maps a gocloud error to one of the error kinds; as reaches the
// provider's own error types (gocloud's Bucket.ErrorAs).
func classify(op, key string, err error, as func(error, any) bool) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		// The caller's context ended; for a write, the outcome is unknown.
		return newError(op, key, ErrRetryable, err)
	}
	switch gcerrors.Code(err) {
	case gcerrors.NotFound:
		return newError(op, key, ErrNotFound, err)
	case gcerrors.FailedPrecondition, gcerrors.AlreadyExists:
		return newError(op, key, ErrExists, err)
	case gcerrors.ResourceExhausted, gcerrors.DeadlineExceeded, gcerrors.Internal:
		return newError(op, key, ErrRetryable, err)
	case gcerrors.PermissionDenied, gcerrors.InvalidArgument, gcerrors.Unimplemented, gcerrors.Canceled:
		return newError(op, key, ErrPermanent, err)
	}
	// Unknown: look at what the provider said.
	var ae smithy.APIError
	if as(err, &ae) && ae.ErrorCode() == "ConditionalRequestConflict" {
		// S3: another conditional write to the key was in flight.
		return newError(op, key, ErrRetryable, err)
	}
	if status, ok := httpStatus(err, as); ok {
		if status >= 500 || status == http.StatusTooManyRequests || status == http.StatusRequestTimeout || status == http.StatusConflict {
			return newError(op, key, ErrRetryable, err)
		}
		return newError(op, key, ErrPermanent, err)
	}
	var ne net.Error
	if errors.As(err, &ne) || errors.Is(err, io.ErrUnexpectedEOF) {
		return newError(op, key, ErrRetryable, err)
	}
	// No HTTP status and no known cause: most likely the connection failed.
	return newError(op, key, ErrRetryable, err)
}

// httpStatus is the status of the store's answer, when there was one. The
// S3 SDK reports a request that got no answer (the connection refused,
// or dropped before the answer came) as a response error of status 0:
// that is no status, and whether a write landed is unknown.
func httpStatus(err error, as func(error, any) bool) (int, bool) {
	var re *awshttp.ResponseError
	if as(err, &re) && re.HTTPStatusCode() > 0 {
		return re.HTTPStatusCode(), true
	}
	var ge *googleapi.Error
	if as(err, &ge) {
		return ge.Code, true
	}
	return 0, false
}

func (c *cloudBucket) Get(ctx context.Context, key string) ([]byte, error) {
	if err := CheckKey(key); err != nil {
		return nil, newError("get", key, ErrPermanent, err)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	r, err := c.b.NewReader(ctx, key, nil)
	if err != nil {
		return nil, c.classify("get", key, err)
	}
	defer r.Close()
	// Read into a buffer of the object's size: reading into one that
	// grows would hold about twice the object while it copies.
	data := make([]byte, max(r.Size(), 0))
	if _, err := io.ReadFull(r, data); err != nil {
		return nil, c.classify("get", key, err)
	}
	rest, err := io.ReadAll(r) // nothing, unless the size was wrong
	if err != nil {
		return nil, c.classify("get", key, err)
	}
	return append(data, rest...), nil
}

func (c *cloudBucket) NewRangeReader(ctx context.Context, key string, offset, length int64) (io.ReadCloser, error) {
	if err := CheckKey(key); err != nil {
		return nil, newError("range-get", key, ErrPermanent, err)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	r, err := c.b.NewRangeReader(ctx, key, offset, length, nil)
	if err != nil {
		if status, ok := httpStatus(err, c.b.ErrorAs); ok && status == http.StatusRequestedRangeNotSatisfiable {
			// The object exists and the range starts at or past its end.
			return io.NopCloser(strings.NewReader("")), nil
		}
		return nil, c.classify("range-get", key, err)
	}
	return &cloudReader{r: r, c: c, key: key}, nil
}

// cloudReader classifies errors met while reading a body.
type cloudReader struct {
	r   *gcblob.Reader
	c   *cloudBucket
	key string
}

func (r *cloudReader) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	if err != nil && err != io.EOF {
		err = r.c.classify("range-get", r.key, err)
	}
	return n, err
}

func (r *cloudReader) Close() error { return r.r.Close() }

// Size is the whole object's size, as the store said it with the range.
func (r *cloudReader) Size() int64 { return r.r.Size() }

func (c *cloudBucket) PutIfAbsent(ctx context.Context, key string, data []byte) error {
	if err := CheckKey(key); err != nil {
		return newError("put-if-absent", key, ErrPermanent, err)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if c.s3 != nil && plain(key) {
		return c.s3.putIfAbsent(ctx, key, data)
	}
	err := c.b.WriteAll(ctx, key, data, &gcblob.WriterOptions{
		IfNotExist:  true,
		ContentType: "application/octet-stream",
		// One request: no multipart upload for the small objects that are
		// created conditionally.
		BufferSize:  max(len(data)+1, 5<<20),
		BeforeWrite: c.beforeWrite,
	})
	return c.classify("put-if-absent", key, err)
}

func (c *cloudBucket) Put(ctx context.Context, key string, r io.Reader) error {
	if err := CheckKey(key); err != nil {
		return newError("put", key, ErrPermanent, err)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if c.s3 != nil && plain(key) {
		buf := smallPutBuffers.Get().(*bytes.Buffer)
		reuse := true
		defer func() {
			if reuse && buf.Cap() <= 2*smallPutLimit {
				buf.Reset()
				smallPutBuffers.Put(buf)
			}
		}()
		whole, err := readSmall(r, buf, smallPutLimit)
		if err != nil {
			return c.classify("put", key, err)
		}
		if whole {
			err := c.s3.put(ctx, key, buf.Bytes(), false)
			// After an answer that came before the whole body went out (an
			// error), the HTTP transport may still be sending it (see
			// net/http.RoundTripper): that buffer is left to the collector.
			reuse = err == nil
			return c.classify("put", key, err)
		}
		r = io.MultiReader(bytes.NewReader(buf.Bytes()), r)
	}
	// gocloud closes (and so commits) the writer even when r fails: on GCS
	// and in memory, what was read so far would become the object. A
	// failing r cancels the upload's context first, which aborts it.
	uctx, cancel := context.WithCancel(ctx)
	defer cancel()
	err := c.b.Upload(uctx, key, &abortOnError{r: r, abort: cancel}, &gcblob.WriterOptions{ContentType: "application/octet-stream", BeforeWrite: c.beforeWrite})
	return c.classify("put", key, err)
}

// abortOnError passes reads through; a read error other than io.EOF calls
// abort before it is returned.
type abortOnError struct {
	r     io.Reader
	abort func()
}

func (a *abortOnError) Read(p []byte) (int, error) {
	n, err := a.r.Read(p)
	if err != nil && err != io.EOF {
		a.abort()
	}
	return n, err
}

func (c *cloudBucket) Delete(ctx context.Context, key string) error {
	if err := CheckKey(key); err != nil {
		return newError("delete", key, ErrPermanent, err)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	return c.classify("delete", key, c.b.Delete(ctx, key))
}

func (c *cloudBucket) Attributes(ctx context.Context, key string) (Attributes, error) {
	if err := CheckKey(key); err != nil {
		return Attributes{}, newError("attributes", key, ErrPermanent, err)
	}
	if err := ctx.Err(); err != nil {
		return Attributes{}, err
	}
	a, err := c.b.Attributes(ctx, key)
	if err != nil {
		return Attributes{}, c.classify("attributes", key, err)
	}
	return Attributes{Size: a.Size, ModTime: a.ModTime}, nil
}

func (c *cloudBucket) ListPage(ctx context.Context, prefix, token string, pageSize int) (Page, error) {
	if err := checkPrefix(prefix); err != nil {
		return Page{}, newError("list", prefix, ErrPermanent, err)
	}
	if err := ctx.Err(); err != nil {
		return Page{}, err
	}
	if pageSize <= 0 {
		pageSize = cloudDefaultPageSize
	}
	tok := gcblob.FirstPageToken
	if token != "" {
		tok = []byte(token)
	}
	objs, next, err := c.b.ListPage(ctx, tok, pageSize, &gcblob.ListOptions{Prefix: prefix})
	if err != nil {
		return Page{}, c.classify("list", prefix, err)
	}
	page := Page{Objects: make([]ObjectInfo, 0, len(objs)), Next: string(next)}
	for _, o := range objs {
		if o.IsDir {
			continue
		}
		page.Objects = append(page.Objects, ObjectInfo{Key: o.Key, Size: o.Size, ModTime: o.ModTime})
	}
	return page, nil
}

func (c *cloudBucket) Close() error { return c.b.Close() }
