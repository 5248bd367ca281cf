package blob

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
)

// MaxDeleteBatch is the most keys one batched delete takes (S3's
// DeleteObjects limit).
const MaxDeleteBatch = 1000

// BatchDeleter is a Bucket that can delete many objects in one request.
type BatchDeleter interface {
	// DeleteBatch deletes up to MaxDeleteBatch keys in one request; a key
	// that is missing is no error. On an error any of the keys may be
	// gone. With no keys it makes no request, and returns
	// errors.ErrUnsupported when the store underneath cannot delete many
	// objects at once (a wrapper answers for the bucket it wraps).
	DeleteBatch(ctx context.Context, keys []string) error
}

// CanDeleteBatch reports whether b deletes many objects in one request.
func CanDeleteBatch(ctx context.Context, b Bucket) bool {
	d, ok := b.(BatchDeleter)
	return ok && d.DeleteBatch(ctx, nil) == nil
}

// DeleteAll deletes keys, missing ones being no error: MaxDeleteBatch at
// a time where the store deletes many objects in one request (S3, a local
// folder), one at a time otherwise. The keys may go in any order, and an
// error may leave any of them in place: callers that need an order delete
// one key at a time.
func DeleteAll(ctx context.Context, b Bucket, keys []string) error {
	if len(keys) == 0 {
		return nil
	}
	if len(keys) > 1 && CanDeleteBatch(ctx, b) {
		d := b.(BatchDeleter)
		for batch := range slices.Chunk(keys, MaxDeleteBatch) {
			if err := d.DeleteBatch(ctx, batch); err != nil {
				return err
			}
		}
		return nil
	}
	return deleteEach(ctx, b, keys)
}

// deleteEach deletes keys one a request, missing ones being no error.
func deleteEach(ctx context.Context, b Bucket, keys []string) error {
	for _, k := range keys {
		if err := b.Delete(ctx, k); err != nil && !errors.Is(err, ErrNotFound) {
			return err
		}
	}
	return nil
}

// overBatch is the error of a batch of more than MaxDeleteBatch keys.
func overBatch(keys []string) error {
	if len(keys) <= MaxDeleteBatch {
		return nil
	}
	return newError("delete", keys[0], ErrPermanent, fmt.Errorf("%d keys in one batch, at most %d", len(keys), MaxDeleteBatch))
}

// DeleteBatch counts one request for a batch the store underneath deletes
// at once.
func (c *Counted) DeleteBatch(ctx context.Context, keys []string) (err error) {
	d, ok := c.b.(BatchDeleter)
	if !ok {
		return errors.ErrUnsupported
	}
	if len(keys) == 0 {
		return d.DeleteBatch(ctx, nil)
	}
	c.c.deletes.Add(1)
	defer c.timed("delete", time.Now(), &err)
	return d.DeleteBatch(ctx, keys)
}

// DeleteBatch removes the files one after the other: a local folder has
// no request to save, and stands for a store that has.
func (b *fileBucket) DeleteBatch(ctx context.Context, keys []string) error {
	if err := overBatch(keys); err != nil {
		return err
	}
	return deleteEach(ctx, b, keys)
}

// DeleteBatch is one S3 DeleteObjects request; other stores delete one
// object a request.
func (c *cloudBucket) DeleteBatch(ctx context.Context, keys []string) error {
	if c.s3 == nil || c.s3.noBatch.Load() {
		if len(keys) > 0 {
			return deleteEach(ctx, c, keys)
		}
		return errors.ErrUnsupported
	}
	if len(keys) == 0 {
		return nil
	}
	if err := overBatch(keys); err != nil {
		return err
	}
	for _, k := range keys {
		if err := CheckKey(k); err != nil {
			return newError("delete", k, ErrPermanent, err)
		}
		if !plain(k) {
			// gocloud stores such a key under another name: delete it
			// through gocloud.
			return deleteEach(ctx, c, keys)
		}
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	err := c.s3.deleteObjects(ctx, keys)
	if errors.Is(err, errNoBatch) {
		c.s3.noBatch.Store(true)
		return deleteEach(ctx, c, keys)
	}
	return err
}

// errNoBatch: the store has no multi-object delete.
var errNoBatch = errors.New("the store does not implement DeleteObjects")

// deleteObjects deletes keys in one DeleteObjects request (quiet: the
// answer lists only the keys it failed to delete; a missing key is
// deleted).
func (p *s3Put) deleteObjects(ctx context.Context, keys []string) error {
	ids := make([]types.ObjectIdentifier, len(keys))
	for i, k := range keys {
		ids[i] = types.ObjectIdentifier{Key: aws.String(p.prefix + k)}
	}
	out, err := p.client.DeleteObjects(ctx, &s3.DeleteObjectsInput{
		Bucket: aws.String(p.bucket),
		Delete: &types.Delete{Objects: ids, Quiet: aws.Bool(true)},
	})
	if err != nil {
		var ae smithy.APIError
		if status, ok := httpStatus(err, errors.As); ok && status == http.StatusNotImplemented ||
			errors.As(err, &ae) && ae.ErrorCode() == "NotImplemented" {
			return errNoBatch
		}
		return classify("delete", keys[0], err, errors.As)
	}
	for _, e := range out.Errors {
		if aws.ToString(e.Code) == "NoSuchKey" {
			continue
		}
		key := aws.ToString(e.Key)
		if len(p.prefix) > 0 && len(key) >= len(p.prefix) {
			key = key[len(p.prefix):]
		}
		kind := ErrRetryable
		if code := aws.ToString(e.Code); code == "AccessDenied" {
			kind = ErrPermanent
		}
		return newError("delete", key, kind, fmt.Errorf("%s: %s (and %d other keys of %d not deleted)", aws.ToString(e.Code), aws.ToString(e.Message), len(out.Errors)-1, len(keys)))
	}
	return nil
}
