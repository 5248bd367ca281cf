// Package fault wraps a blob.Bucket to inject the failures object stores
// produce, for tests: errors by operation and key, latency, writes that
// land but whose response is lost, "412 Precondition Failed" for a
// conditional create that in fact succeeded (what an SDK retry after a
// timeout sees), S3's 409 ConditionalRequestConflict, stores that ignore
// conditional creates, and a crash after N requests.
//
// What to inject is decided per request by an Injector. Injectors compose:
// filter one by operation (OnOps) or key (OnKeys), fire it with a
// probability (WithProbability), on the Nth request (Nth) or after N
// (AfterN), and try several in turn (Any).
package fault

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stratadb/strata/blob"
)

// Op names a Bucket method.
type Op string

// The operations a fault can target.
const (
	OpGet         Op = "get"
	OpRangeGet    Op = "range-get"
	OpPut         Op = "put"
	OpPutIfAbsent Op = "put-if-absent"
	OpDelete      Op = "delete"
	OpList        Op = "list"
	OpAttributes  Op = "attributes"
)

// WriteOps are the operations that change the store.
var WriteOps = []Op{OpPut, OpPutIfAbsent, OpDelete}

// Action is what happens to a request.
type Action int

const (
	// None passes the request through (after Delay, if any).
	None Action = iota
	// Fail returns Fault.Err (default: a retryable error) without making
	// the request.
	Fail
	// LoseResponse makes the request, then returns a retryable error as
	// if the response had been lost: a write lands, its caller can't tell.
	LoseResponse
	// FalseExists makes a PutIfAbsent, then returns ErrExists even though
	// it created the object. On other operations it acts as LoseResponse.
	FalseExists
	// Conflict returns S3's 409 ConditionalRequestConflict (retryable)
	// without making the request.
	Conflict
	// IgnoreCondition performs a PutIfAbsent as an unconditional Put, as
	// a store without conditional writes would. Other operations pass.
	IgnoreCondition
	// Crash fails this request and every later one with ErrCrashed, as if
	// the process had died. Revive ends it.
	Crash
)

var actionNames = [...]string{"none", "fail", "lose-response", "false-exists", "conflict-409", "ignore-condition", "crash"}

func (a Action) String() string {
	if int(a) < len(actionNames) {
		return actionNames[a]
	}
	return fmt.Sprintf("action(%d)", int(a))
}

// Fault is what an Injector decides for one request.
type Fault struct {
	Action Action
	Delay  time.Duration // slept before the request, whatever the action
	Err    error         // for Fail; nil means a retryable injected error
}

// Errors the wrapper returns.
var (
	// ErrInjected is the cause of every injected error but a crash.
	ErrInjected = errors.New("injected fault")
	// ErrCrashed is the cause of every error after a Crash.
	ErrCrashed = errors.New("simulated crash")
)

// Bucket is a blob.Bucket with injected faults. The zero value is not
// usable; call Wrap.
type Bucket struct {
	b       blob.Bucket
	inj     atomic.Pointer[Injector]
	crashed atomic.Bool
	ops     atomic.Int64
	counts  [len(actionNames)]atomic.Int64
}

var _ blob.Bucket = (*Bucket)(nil)

// Wrap returns b with faults decided by inj (nil: none yet).
func Wrap(b blob.Bucket, inj Injector) *Bucket {
	f := &Bucket{b: b}
	f.SetInjector(inj)
	return f
}

// SetInjector replaces the injector; nil injects nothing.
func (f *Bucket) SetInjector(inj Injector) {
	if inj == nil {
		inj = Never()
	}
	f.inj.Store(&inj)
}

// Crashed reports whether a Crash has happened and not been revived.
func (f *Bucket) Crashed() bool { return f.crashed.Load() }

// Revive ends a crash: later requests pass to the injector again.
func (f *Bucket) Revive() { f.crashed.Store(false) }

// Requests returns how many requests reached the wrapper.
func (f *Bucket) Requests() int64 { return f.ops.Load() }

// Injected returns how many requests met each action, by name; "none" is
// left out.
func (f *Bucket) Injected() map[string]int64 {
	m := map[string]int64{}
	for a := Fail; int(a) < len(actionNames); a++ {
		if n := f.counts[a].Load(); n > 0 {
			m[a.String()] = n
		}
	}
	return m
}

// Unwrap returns the bucket underneath.
func (f *Bucket) Unwrap() blob.Bucket { return f.b }

// decide returns the action for one request, after sleeping its delay.
func (f *Bucket) decide(ctx context.Context, op Op, key string) (Action, error) {
	f.ops.Add(1)
	if f.crashed.Load() {
		f.counts[Crash].Add(1)
		return Crash, &blob.Error{Op: string(op), Key: key, Kind: blob.ErrPermanent, Err: ErrCrashed}
	}
	flt := (*f.inj.Load()).Inject(op, key)
	if flt.Delay > 0 {
		t := time.NewTimer(flt.Delay)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return Fail, ctx.Err()
		}
	}
	f.counts[flt.Action].Add(1)
	switch flt.Action {
	case Fail:
		if flt.Err != nil {
			return Fail, flt.Err
		}
		return Fail, &blob.Error{Op: string(op), Key: key, Kind: blob.ErrRetryable, Err: ErrInjected}
	case Conflict:
		return Conflict, &blob.Error{Op: string(op), Key: key, Kind: blob.ErrRetryable,
			Err: fmt.Errorf("%w: 409 ConditionalRequestConflict", ErrInjected)}
	case Crash:
		f.crashed.Store(true)
		return Crash, &blob.Error{Op: string(op), Key: key, Kind: blob.ErrPermanent, Err: ErrCrashed}
	}
	return flt.Action, nil
}

// after turns a request's own result into what the caller sees.
func after(act Action, op Op, key string, err error) error {
	if err != nil {
		return err
	}
	switch act {
	case LoseResponse:
		return &blob.Error{Op: string(op), Key: key, Kind: blob.ErrRetryable,
			Err: fmt.Errorf("%w: response lost after the request landed", ErrInjected)}
	case FalseExists:
		if op == OpPutIfAbsent {
			return &blob.Error{Op: string(op), Key: key, Kind: blob.ErrExists,
				Err: fmt.Errorf("%w: 412 after the create landed", ErrInjected)}
		}
		return after(LoseResponse, op, key, nil)
	}
	return nil
}

func (f *Bucket) Get(ctx context.Context, key string) ([]byte, error) {
	act, err := f.decide(ctx, OpGet, key)
	if err != nil {
		return nil, err
	}
	data, err := f.b.Get(ctx, key)
	if err = after(act, OpGet, key, err); err != nil {
		return nil, err
	}
	return data, nil
}

func (f *Bucket) NewRangeReader(ctx context.Context, key string, offset, length int64) (io.ReadCloser, error) {
	act, err := f.decide(ctx, OpRangeGet, key)
	if err != nil {
		return nil, err
	}
	r, err := f.b.NewRangeReader(ctx, key, offset, length)
	if err = after(act, OpRangeGet, key, err); err != nil {
		if r != nil {
			r.Close()
		}
		return nil, err
	}
	return r, nil
}

func (f *Bucket) PutIfAbsent(ctx context.Context, key string, data []byte) error {
	act, err := f.decide(ctx, OpPutIfAbsent, key)
	if err != nil {
		return err
	}
	if act == IgnoreCondition {
		return f.b.Put(ctx, key, bytesReader(data))
	}
	return after(act, OpPutIfAbsent, key, f.b.PutIfAbsent(ctx, key, data))
}

func (f *Bucket) Put(ctx context.Context, key string, r io.Reader) error {
	act, err := f.decide(ctx, OpPut, key)
	if err != nil {
		return err
	}
	return after(act, OpPut, key, f.b.Put(ctx, key, r))
}

func (f *Bucket) Delete(ctx context.Context, key string) error {
	act, err := f.decide(ctx, OpDelete, key)
	if err != nil {
		return err
	}
	return after(act, OpDelete, key, f.b.Delete(ctx, key))
}

// DeleteBatch is one request, as the store sees it: one decision, made
// for its first key, applies to the whole batch.
func (f *Bucket) DeleteBatch(ctx context.Context, keys []string) error {
	d, ok := f.b.(blob.BatchDeleter)
	if !ok {
		return errors.ErrUnsupported
	}
	if len(keys) == 0 {
		return d.DeleteBatch(ctx, nil)
	}
	act, err := f.decide(ctx, OpDelete, keys[0])
	if err != nil {
		return err
	}
	return after(act, OpDelete, keys[0], d.DeleteBatch(ctx, keys))
}

func (f *Bucket) ListPage(ctx context.Context, prefix, token string, pageSize int) (blob.Page, error) {
	act, err := f.decide(ctx, OpList, prefix)
	if err != nil {
		return blob.Page{}, err
	}
	p, err := f.b.ListPage(ctx, prefix, token, pageSize)
	if err = after(act, OpList, prefix, err); err != nil {
		return blob.Page{}, err
	}
	return p, nil
}

func (f *Bucket) ListDir(ctx context.Context, prefix, token string, pageSize int) (blob.DirPage, error) {
	act, err := f.decide(ctx, OpList, prefix)
	if err != nil {
		return blob.DirPage{}, err
	}
	p, err := f.b.ListDir(ctx, prefix, token, pageSize)
	if err = after(act, OpList, prefix, err); err != nil {
		return blob.DirPage{}, err
	}
	return p, nil
}

func (f *Bucket) Attributes(ctx context.Context, key string) (blob.Attributes, error) {
	act, err := f.decide(ctx, OpAttributes, key)
	if err != nil {
		return blob.Attributes{}, err
	}
	a, err := f.b.Attributes(ctx, key)
	if err = after(act, OpAttributes, key, err); err != nil {
		return blob.Attributes{}, err
	}
	return a, nil
}

func (f *Bucket) Close() error { return f.b.Close() }

// mutexRand is a seeded source safe for concurrent use.
type mutexRand struct {
	mu sync.Mutex
	r  interface{ Float64() float64 }
}

func (m *mutexRand) Float64() float64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.r.Float64()
}
