package walshard_test

import (
	"context"
	"io"
	"strings"
	"sync"
	"testing"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/table"
	"github.com/stratadb/strata/walshard"
)

// beforeManifestRead runs fn once, just before the first read of a
// manifest made through it.
type beforeManifestRead struct {
	blob.Bucket
	once sync.Once
	fn   func()
}

func (h *beforeManifestRead) hook(key string) {
	if strings.HasPrefix(key, table.VersionsDir) {
		h.once.Do(h.fn)
	}
}

func (h *beforeManifestRead) Get(ctx context.Context, key string) ([]byte, error) {
	h.hook(key)
	return h.Bucket.Get(ctx, key)
}

func (h *beforeManifestRead) NewRangeReader(ctx context.Context, key string, off, n int64) (io.ReadCloser, error) {
	h.hook(key)
	return h.Bucket.NewRangeReader(ctx, key, off, n)
}

// A fresh read of the fleet that lists the newest version, then, before it
// reads that manifest, meets an adoption that merges a shard's rows into
// a newer version and retires the emptied shard's registration, still
// sees those rows: acknowledged before the read began, they are in it.
func TestAFleetReadRacingAnAdoptionSeesTheAdoptedRows(t *testing.T) {
	b := newTable(t, "mem://")
	owner := open(t, b, "pod-1", walshard.Options{})
	defer owner.Close()
	appendIDs(t, owner, 1, 2, 3)
	var adopted walshard.AdoptResult
	var adoptErr error
	racing := &beforeManifestRead{Bucket: b, fn: func() {
		adopted, adoptErr = walshard.Adopt(ctx, b, "pod-1", walshard.Options{})
	}}
	seen := countIDs(t, walshard.ScanFleet(ctx, racing, table.ScanOptions{}))
	if adoptErr != nil || !adopted.Retired || adopted.Rows != 3 {
		t.Fatalf("the racing adoption: %+v, %v", adopted, adoptErr)
	}
	exactlyOnce(t, seen, []int64{1, 2, 3})
}
