package blob_test

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/internal/testenv"
)

// On S3, conditional creates go in one PutObject of their own, beside
// gocloud's writer for Put: objects of every size read back byte for byte
// under the URL's prefix whichever wrote them, and a conditional create of
// an existing key reports ErrExists.
func TestS3PutSizesMinIO(t *testing.T) {
	ctx := context.Background()
	b, err := blob.Open(ctx, testenv.MinIO(t).URL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	rng := rand.New(rand.NewPCG(1, 2))
	for _, size := range []int{0, 1, 1 << 20, 6 << 20} {
		data := make([]byte, size)
		for i := range data {
			data[i] = byte(rng.Uint32())
		}
		key := "sizes/" + strconv.Itoa(size)
		if err := b.Put(ctx, key, bytes.NewReader(data)); err != nil {
			t.Fatalf("put %d bytes: %v", size, err)
		}
		got, err := b.Get(ctx, key)
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("%d bytes read back as %d: %v", size, len(got), err)
		}
		if err := b.PutIfAbsent(ctx, key, []byte("x")); !errors.Is(err, blob.ErrExists) {
			t.Fatalf("conditional create over %d bytes: %v, want ErrExists", size, err)
		}
		created := "sizes/created-" + strconv.Itoa(size)
		if err := b.PutIfAbsent(ctx, created, data); err != nil {
			t.Fatalf("conditional create of %d bytes: %v", size, err)
		}
		if got, err := b.Get(ctx, created); err != nil || !bytes.Equal(got, data) {
			t.Fatalf("%d bytes created conditionally read back as %d: %v", size, len(got), err)
		}
	}
}
