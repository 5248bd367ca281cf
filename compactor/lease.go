package compactor

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/table/format"
)

// ErrLeaseHeld: another compactor holds the table's lease. The error is a
// *LeaseHeldError naming the holder.
var ErrLeaseHeld = errors.New("compactor: another compactor holds the lease")

// LeaseHeldError says who holds the table's lease, and until when.
type LeaseHeldError struct {
	Holder  string
	Expires time.Time
}

func (e *LeaseHeldError) Error() string {
	return fmt.Sprintf("%v (%s, until %s)", ErrLeaseHeld, e.Holder, e.Expires.UTC().Format(time.RFC3339))
}

func (e *LeaseHeldError) Is(target error) bool { return target == ErrLeaseHeld }

// Lease is a compactor's claim on a table, so that two overlapping Jobs do
// not both work. Correctness never depends on it: the conflict matrix
// already keeps two compactions from losing rows.
type Lease struct {
	Holder  string    `json:"holder"`
	Epoch   uint64    `json:"epoch"`
	Expires time.Time `json:"expires"`         // by the holder's clock
	TTL     float64   `json:"ttl_s,omitempty"` // what the holder took it for, in seconds
	dir     string    // the lease's folder: the table's, or a Part's
}

// leaseSlack is how far the clocks of a lease's holder, the store and its
// readers may disagree before a lease ends early for a reader.
const leaseSlack = time.Minute

// liveUntil is when a lease the store wrote at written (by its own clock)
// ends: at its expiry by its holder's clock, but no later than written
// plus its TTL and leaseSlack. A holder whose clock runs a year ahead
// would otherwise keep every compactor off the table for a year — itself
// included — where at worst a lease ended early lets two compactors work
// at once, which correctness never minds.
func (l Lease) liveUntil(written time.Time) time.Time {
	if l.TTL <= 0 || written.IsZero() {
		return l.Expires
	}
	bound := written.Add(time.Duration(l.TTL*float64(time.Second)) + leaseSlack)
	if l.Expires.After(bound) {
		return bound
	}
	return l.Expires
}

func leaseKey(dir string, epoch uint64) string {
	return dir + format.Inverted(epoch) + ".json"
}

// AcquireLease takes the lease for ttl: it creates lease epoch E+1 with a
// conditional create, where E is the newest lease, once that one has
// expired (a stale lease is broken) or was released. It returns
// ErrLeaseHeld when a live lease of another holder is there.
func AcquireLease(ctx context.Context, b blob.Bucket, holder string, ttl time.Duration, now time.Time) (Lease, error) {
	return acquireLease(ctx, b, leaseDir, holder, ttl, now)
}

func acquireLease(ctx context.Context, b blob.Bucket, dir, holder string, ttl time.Duration, now time.Time) (Lease, error) {
	for range 10 {
		page, err := b.ListPage(ctx, dir, "", 1)
		if err != nil {
			return Lease{}, err
		}
		next := uint64(1)
		if len(page.Objects) > 0 {
			key := page.Objects[0].Key
			epoch, ok := format.ParseInverted(strings.TrimSuffix(strings.TrimPrefix(key, dir), ".json"))
			if !ok {
				return Lease{}, fmt.Errorf("compactor: unexpected lease object %q", key)
			}
			data, err := b.Get(ctx, key)
			if err != nil && !errors.Is(err, blob.ErrNotFound) {
				return Lease{}, err
			}
			var cur Lease
			if err == nil && json.Unmarshal(data, &cur) == nil {
				if until := cur.liveUntil(page.Objects[0].ModTime); now.Before(until) {
					return cur, &LeaseHeldError{Holder: cur.Holder, Expires: until}
				}
			}
			next = epoch + 1
		}
		l := Lease{Holder: holder, Epoch: next, Expires: now.Add(ttl), TTL: ttl.Seconds(), dir: dir}
		data, _ := json.Marshal(l)
		err = putLease(ctx, b, leaseKey(dir, next), data)
		if err == nil {
			pruneLeases(ctx, b, dir)
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
	err := putLease(ctx, b, leaseKey(l.folder(), l.Epoch+1), data)
	if errors.Is(err, blob.ErrExists) {
		return nil // someone broke it already
	}
	return err
}

// putLease creates a lease object. When the store's answer is an error —
// a lost response, or "exists" for a create that landed — the object is
// read back: if it holds exactly data, the create was ours. Otherwise a
// lost answer would leave the table leased to its own holder until the
// TTL ran out.
func putLease(ctx context.Context, b blob.Bucket, key string, data []byte) error {
	err := b.PutIfAbsent(ctx, key, data)
	if err != nil {
		if got, gerr := b.Get(ctx, key); gerr == nil && bytes.Equal(got, data) {
			return nil
		}
	}
	return err
}

// folder is the lease's folder.
func (l Lease) folder() string {
	if l.dir == "" {
		return leaseDir
	}
	return l.dir
}

// pruneLeases deletes all but the newest few lease objects (best effort).
func pruneLeases(ctx context.Context, b blob.Bucket, dir string) {
	n := 0
	for o, err := range blob.List(ctx, b, dir, 0) {
		if err != nil {
			return
		}
		if n++; n > 4 {
			_ = b.Delete(ctx, o.Key)
		}
	}
}

// CurrentLease reads the table's live lease, if any: false when the newest
// was released or has expired.
func CurrentLease(ctx context.Context, b blob.Bucket, now time.Time) (Lease, bool, error) {
	page, err := b.ListPage(ctx, leaseDir, "", 1)
	if err != nil || len(page.Objects) == 0 {
		return Lease{}, false, err
	}
	data, err := b.Get(ctx, page.Objects[0].Key)
	if errors.Is(err, blob.ErrNotFound) {
		return Lease{}, false, nil // pruned or replaced meanwhile
	}
	if err != nil {
		return Lease{}, false, err
	}
	var cur Lease
	if json.Unmarshal(data, &cur) != nil {
		return Lease{}, false, nil
	}
	if cur.Expires = cur.liveUntil(page.Objects[0].ModTime); !now.Before(cur.Expires) {
		return Lease{}, false, nil
	}
	return cur, true, nil
}

// renew extends the lease by ttl from now: lease epoch E+1 with the same
// holder. It fails with ErrLeaseHeld when another compactor broke it.
func (l Lease) renew(ctx context.Context, b blob.Bucket, ttl time.Duration, now time.Time) (Lease, error) {
	next := Lease{Holder: l.Holder, Epoch: l.Epoch + 1, Expires: now.Add(ttl), TTL: ttl.Seconds(), dir: l.dir}
	data, _ := json.Marshal(next)
	err := putLease(ctx, b, leaseKey(l.folder(), next.Epoch), data)
	if errors.Is(err, blob.ErrExists) {
		return l, &LeaseHeldError{Holder: "another compactor (it broke this lease)", Expires: l.Expires}
	}
	if err != nil {
		return l, err
	}
	pruneLeases(ctx, b, l.folder())
	return next, nil
}

// MinLeaseTTL is the shortest lease a compactor takes: it is renewed every
// third of its TTL, and a renewal needs a round trip to the store.
// DefaultLeaseTTL and DefaultHolder are what a compactor that names
// neither uses.
const (
	MinLeaseTTL     = 10 * time.Second
	DefaultLeaseTTL = 30 * time.Minute
	DefaultHolder   = "strata-compactor"
)

// HeldLease is a lease kept alive, renewed every third of its TTL, until
// Release.
type HeldLease struct {
	b    blob.Bucket
	mu   sync.Mutex
	cur  Lease
	stop chan struct{}
	done chan struct{}
}

// TakeLease acquires the table's lease for holder (AcquireLease) and keeps
// renewing it until Release: a compaction that runs longer than the TTL
// keeps others out. A renewal that fails is retried at the next tick; one
// refused because another compactor broke the lease stops the renewals
// (correctness never depends on the lease).
func TakeLease(ctx context.Context, b blob.Bucket, holder string, ttl time.Duration, now time.Time) (*HeldLease, error) {
	return TakePartLease(ctx, b, Part{}, holder, ttl, now)
}

// TakePartLease is TakeLease for one Part of the table's compaction: the
// parts of a split (Of above 1) each have a lease of their own, so that
// they work at once, and none of them is the table's (a Job that compacts
// the whole table, Of 0 or 1).
func TakePartLease(ctx context.Context, b blob.Bucket, part Part, holder string, ttl time.Duration, now time.Time) (*HeldLease, error) {
	l, err := acquireLease(ctx, b, part.leaseDir(), holder, ttl, now)
	if err != nil {
		return nil, err
	}
	h := &HeldLease{b: b, cur: l, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(h.done)
		t := time.NewTicker(max(ttl/3, time.Second))
		defer t.Stop()
		for {
			select {
			case <-h.stop:
				return
			case <-t.C:
			}
			h.mu.Lock()
			cur := h.cur
			h.mu.Unlock()
			next, err := cur.renew(context.WithoutCancel(ctx), b, ttl, time.Now())
			if errors.Is(err, ErrLeaseHeld) {
				return
			}
			h.mu.Lock()
			h.cur = next
			h.mu.Unlock()
		}
	}()
	return h, nil
}

// Lease is the lease as last renewed.
func (h *HeldLease) Lease() Lease {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.cur
}

// Release stops the renewals and ends the lease.
func (h *HeldLease) Release(ctx context.Context) error {
	close(h.stop)
	<-h.done
	return h.Lease().Release(ctx, h.b)
}
