package compactor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/table"
)

// ErrLeaseHeld: another compactor holds the table's lease.
var ErrLeaseHeld = errors.New("compactor: another compactor holds the lease")

// Lease is a compactor's claim on a table, so that two overlapping Jobs do
// not both work. Correctness never depends on it: the conflict matrix
// already keeps two compactions from losing rows.
type Lease struct {
	Holder  string    `json:"holder"`
	Epoch   uint64    `json:"epoch"`
	Expires time.Time `json:"expires"`
}

func leaseKey(epoch uint64) string {
	return leaseDir + table.Inverted(epoch) + ".json"
}

// AcquireLease takes the lease for ttl: it creates lease epoch E+1 with a
// conditional create, where E is the newest lease, once that one has
// expired (a stale lease is broken) or was released. It returns
// ErrLeaseHeld when a live lease of another holder is there.
func AcquireLease(ctx context.Context, b blob.Bucket, holder string, ttl time.Duration, now time.Time) (Lease, error) {
	for range 10 {
		page, err := b.ListPage(ctx, leaseDir, "", 1)
		if err != nil {
			return Lease{}, err
		}
		next := uint64(1)
		if len(page.Objects) > 0 {
			key := page.Objects[0].Key
			epoch, ok := table.ParseInverted(strings.TrimSuffix(strings.TrimPrefix(key, leaseDir), ".json"))
			if !ok {
				return Lease{}, fmt.Errorf("compactor: unexpected lease object %q", key)
			}
			data, err := b.Get(ctx, key)
			if err != nil && !errors.Is(err, blob.ErrNotFound) {
				return Lease{}, err
			}
			var cur Lease
			if err == nil && json.Unmarshal(data, &cur) == nil && now.Before(cur.Expires) {
				return cur, fmt.Errorf("%w (%s, until %s)", ErrLeaseHeld, cur.Holder, cur.Expires.Format(time.RFC3339))
			}
			next = epoch + 1
		}
		l := Lease{Holder: holder, Epoch: next, Expires: now.Add(ttl)}
		data, _ := json.Marshal(l)
		err = b.PutIfAbsent(ctx, leaseKey(next), data)
		if err == nil {
			pruneLeases(ctx, b)
			return l, nil
		}
		if !errors.Is(err, blob.ErrExists) {
			return Lease{}, err
		}
	}
	return Lease{}, ErrLeaseHeld
}

// Release ends the lease early, so the next Job need not wait for it to
// expire. It creates a released marker as the next lease epoch.
func (l Lease) Release(ctx context.Context, b blob.Bucket) error {
	data, _ := json.Marshal(Lease{Holder: l.Holder + " (released)", Epoch: l.Epoch + 1})
	err := b.PutIfAbsent(ctx, leaseKey(l.Epoch+1), data)
	if errors.Is(err, blob.ErrExists) {
		return nil // someone broke it already
	}
	return err
}

// pruneLeases deletes all but the newest few lease objects (best effort).
func pruneLeases(ctx context.Context, b blob.Bucket) {
	n := 0
	for o, err := range blob.List(ctx, b, leaseDir, 0) {
		if err != nil {
			return
		}
		if n++; n > 4 {
			_ = b.Delete(ctx, o.Key)
		}
	}
}
