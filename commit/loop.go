package commit

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/table"
)

// Options tune the commit loop. The zero value (or nil) means defaults.
type Options struct {
	// Writer names the committer in the manifests it makes (a host or pod).
	Writer string
	// MaxAttempts bounds conditional creates per commit; 0 means 100.
	// Budget is the main bound: losing a race to another writer is normal
	// on a busy table, and each loss costs a few milliseconds.
	MaxAttempts int
	// Budget bounds a commit's wall time; 0 means 30s.
	Budget time.Duration
	// BaseBackoff and MaxBackoff bound the jittered exponential backoff
	// between attempts; 0 means 2ms and 100ms. Losing a race is not a sign
	// of overload (the loser already holds the newest version), so the
	// backoff stays short.
	BaseBackoff, MaxBackoff time.Duration
	// StallCheck: a commit that took longer than this from reading its base
	// version checks the GC boundary before reporting success; 0 means 30s.
	// The garbage collector never removes a manifest younger than 10× it.
	StallCheck time.Duration
	// Now is the clock (default time.Now); tests move it.
	Now func() time.Time
	// CatchUp makes the loop look for newer versions (one LIST) before its
	// first attempt, when the base it was given may be stale. Table sets
	// it for handles that share a table with other writers.
	CatchUp bool
}

func (o *Options) withDefaults() Options {
	var c Options
	if o != nil {
		c = *o
	}
	if c.MaxAttempts <= 0 {
		c.MaxAttempts = 100
	}
	if c.Budget <= 0 {
		c.Budget = 30 * time.Second
	}
	if c.BaseBackoff <= 0 {
		c.BaseBackoff = 2 * time.Millisecond
	}
	if c.MaxBackoff <= 0 {
		c.MaxBackoff = 100 * time.Millisecond
	}
	if c.StallCheck <= 0 {
		c.StallCheck = 30 * time.Second
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

// Result describes a commit that succeeded.
type Result struct {
	Version  uint64          // the version that holds the commit
	Manifest *table.Manifest // that version's manifest (nil when Done)
	Attempts int             // conditional creates tried
	Rebases  int             // times the loop caught up with newer versions
	// Done is true when no manifest was written because a newer commit
	// already covered ours (a merge of the same shard); Version is then
	// the version that did.
	Done bool
}

// Commit commits txn on top of base (nil: the latest version) and returns
// the version that holds it. The transaction's data objects must already
// be in the bucket. A zero CommitID is filled in with a fresh ULID.
func Commit(ctx context.Context, b blob.Bucket, base *table.Manifest, txn table.Transaction, opts *Options) (Result, error) {
	o := opts.withDefaults()
	if txn.CommitID == "" {
		txn.CommitID = table.NewID()
	}
	if txn.Writer == "" {
		txn.Writer = o.Writer
	}
	start := time.Now()
	readAt := start
	cur := base
	if cur == nil {
		var err error
		if cur, err = table.ReadLatest(ctx, b); err != nil {
			return Result{}, err
		}
	}
	if txn.ReadVersion == 0 {
		txn.ReadVersion = cur.Version
	}
	// Versions above ReadVersion that cur already includes must be checked.
	if cur.Version > txn.ReadVersion {
		readBase, err := table.ReadManifest(ctx, b, txn.ReadVersion)
		if err != nil {
			return Result{}, err
		}
		if res, done, _, err := checkRange(ctx, b, &txn, readBase, cur.Version); err != nil || done {
			return res, err
		}
	}
	if o.CatchUp {
		// One LIST, and the transactions of any versions we lack: far
		// cheaper than a conditional create that is sure to lose.
		latest, err := table.LatestVersion(ctx, b)
		if err != nil {
			return Result{}, err
		}
		if latest > cur.Version {
			r, done, newest, err := checkRange(ctx, b, &txn, cur, latest)
			if err != nil || done {
				return r, err
			}
			cur, readAt = newest, time.Now()
		}
	}
	var res Result
	var last error
	for res.Attempts < o.MaxAttempts && time.Since(start) < o.Budget {
		next, err := Apply(cur, &txn)
		if err != nil {
			return Result{}, err
		}
		data, err := table.EncodeManifest(next)
		if err != nil {
			return Result{}, err
		}
		res.Attempts++
		err = b.PutIfAbsent(ctx, table.ManifestKey(next.Version), data)
		if err == nil {
			return finish(ctx, b, &txn, next, res, readAt, o)
		}
		if errors.Is(err, blob.ErrPermanent) || ctx.Err() != nil {
			return Result{}, fmt.Errorf("commit %s at v%d: %w", txn.CommitID, next.Version, err)
		}
		last = err
		// The point of no return: the create may have landed even though
		// it reported an error (a lost response, or a 412 that an SDK retry
		// of our own request provoked). Read before anything else.
		landed, err := readTransaction(ctx, b, next.Version, o)
		if err != nil && !errors.Is(err, table.ErrVersionNotFound) {
			return Result{}, fmt.Errorf("commit %s: resolving the outcome at v%d: %w", txn.CommitID, next.Version, err)
		}
		if landed == nil {
			// Nothing there (the request failed before landing, or a 409
			// ConditionalRequestConflict): the same version is still free.
			sleep(ctx, backoff(o, res.Attempts))
			continue
		}
		if landed.CommitID == txn.CommitID {
			// Ours landed; what we wrote is next.
			return finish(ctx, b, &txn, next, res, readAt, o)
		}
		// Someone else holds next.Version. Back off first if we keep
		// losing (so the state we then read is fresh), then catch up to the
		// newest version, checking each commit we missed.
		res.Rebases++
		if res.Rebases > 3 {
			sleep(ctx, backoff(o, res.Rebases-3))
		}
		latest, err := table.LatestVersion(ctx, b)
		if err != nil {
			return Result{}, err
		}
		latest = max(latest, next.Version)
		r, done, newest, err := checkRange(ctx, b, &txn, cur, latest)
		if err != nil || done {
			return r, err
		}
		cur, readAt = newest, time.Now()
	}
	if ctx.Err() != nil {
		return Result{}, ctx.Err()
	}
	return Result{}, &BudgetError{CommitID: txn.CommitID, Attempts: res.Attempts, Last: last}
}

// checkRange checks txn against every commit in (from, to], reading only
// their transactions, and returns the state of version to, rebuilt from
// cur (version from) by replaying them.
func checkRange(ctx context.Context, b blob.Bucket, txn *table.Transaction, cur *table.Manifest, to uint64) (Result, bool, *table.Manifest, error) {
	for v := cur.Version + 1; v <= to; v++ {
		theirs, err := table.ReadTransaction(ctx, b, v)
		if err != nil {
			return Result{}, false, nil, err
		}
		if theirs.CommitID == txn.CommitID {
			// Ours landed earlier (an ambiguous create we could not see
			// at the time); it must not be committed again.
			m, err := table.ReadManifest(ctx, b, v)
			return Result{Version: v, Manifest: m}, err == nil, m, err
		}
		switch Check(txn, theirs) {
		case Compatible:
		case Done:
			return Result{Version: v, Done: true}, true, nil, nil
		case Retry:
			return Result{}, false, nil, &ConflictError{Ours: *txn, Theirs: *theirs, Version: v, Retryable: true}
		case Conflict:
			return Result{}, false, nil, &ConflictError{Ours: *txn, Theirs: *theirs, Version: v}
		}
		next, err := Replay(cur, theirs)
		if err != nil {
			// The record does not rebuild the state: read it whole.
			if next, err = table.ReadManifest(ctx, b, v); err != nil {
				return Result{}, false, nil, err
			}
		}
		cur = next
	}
	return Result{}, false, cur, nil
}

// readTransaction reads the transaction of version v, retrying transient
// errors briefly: the outcome of an ambiguous create must be known before
// moving on.
func readTransaction(ctx context.Context, b blob.Bucket, v uint64, o Options) (*table.Transaction, error) {
	var err error
	for i := range 10 {
		var t *table.Transaction
		t, err = table.ReadTransaction(ctx, b, v)
		if err == nil || !blob.IsRetryable(err) {
			return t, err
		}
		sleep(ctx, backoff(o, i+1))
	}
	return nil, err
}

// finish reports success, unless the commit stalled for so long that the
// garbage collector may have removed what it relied on:
//
//   - the version it created (then the manifest is a resurrected,
//     unreachable one: it is deleted), checked when the commit took longer
//     than StallCheck from reading its base;
//   - a fragment it adds, checked when that fragment is older than
//     MinGCAge less a margin (GC deletes unreferenced objects only once
//     older than MinGCAge). A lost fragment is removed again by a Rewrite,
//     so the table stays readable; the commit was not acknowledged, and
//     its caller writes the data again.
func finish(ctx context.Context, b blob.Bucket, txn *table.Transaction, m *table.Manifest, res Result, readAt time.Time, o Options) (Result, error) {
	if time.Since(readAt) > o.StallCheck {
		boundary, err := GCBoundary(ctx, b)
		if err != nil {
			return Result{}, fmt.Errorf("commit %s: checking the GC boundary after a stall: %w", txn.CommitID, err)
		}
		if m.Version <= boundary {
			_ = b.Delete(ctx, table.ManifestKey(m.Version))
			return Result{}, &ConflictError{Ours: *txn, Version: m.Version, Retryable: true,
				Reason: fmt.Sprintf("stalled past garbage collection: v%d is at or below the GC boundary v%d", m.Version, boundary)}
		}
	}
	if lost, err := lostFragments(ctx, b, m, o); err != nil || len(lost) > 0 {
		if err != nil {
			return Result{}, fmt.Errorf("commit %s: checking its fragments after a stall: %w", txn.CommitID, err)
		}
		if err := undo(ctx, b, m, o); err != nil {
			return Result{}, fmt.Errorf("commit %s: v%d references fragments %v that garbage collection deleted during a stall, and undoing it failed: %w", txn.CommitID, m.Version, lost, err)
		}
		return Result{}, &ConflictError{Ours: *txn, Version: m.Version, Retryable: true, LostData: true,
			Reason: fmt.Sprintf("stalled past garbage collection: fragments %v were deleted before v%d landed; the commit was undone, write the data anew", lost, m.Version)}
	}
	res.Version, res.Manifest = m.Version, m
	return res, nil
}

// undo commits a Rewrite that takes back what the commit that made m did
// to the fragments: it removes every fragment it added and puts back every
// fragment it removed (a compaction's sources), whose objects must still
// be there.
func undo(ctx context.Context, b blob.Bucket, m *table.Manifest, o Options) error {
	repair := table.Transaction{Kind: table.KindRewrite, Writer: m.Transaction.Writer}
	for _, f := range m.Transaction.Added {
		repair.Removed = append(repair.Removed, f.ID)
	}
	if len(m.Transaction.Removed) > 0 {
		parent, err := table.ReadManifest(ctx, b, m.Parent)
		if err != nil {
			return err
		}
		for _, id := range m.Transaction.Removed {
			f := parent.Fragment(id)
			if f == nil {
				return fmt.Errorf("fragment %d of v%d is not in v%d", id, m.Version, m.Parent)
			}
			if _, err := b.Attributes(ctx, f.Key); err != nil {
				return fmt.Errorf("the fragment %s it replaced: %w", f.Key, err)
			}
			repair.Added = append(repair.Added, *f)
		}
	}
	_, err := Commit(ctx, b, m, repair, &o)
	return err
}

// lostFragments returns the ids of fragments the commit that made m added
// which are old enough for GC to have taken, and are gone. Merged shard
// generations are exempt: GC never deletes a generation above its shard's
// watermark.
func lostFragments(ctx context.Context, b blob.Bucket, m *table.Manifest, o Options) ([]uint64, error) {
	if m.Transaction.Kind == table.KindMerge {
		return nil, nil
	}
	var lost []uint64
	for _, f := range m.Transaction.Added {
		if f.Created.IsZero() || o.Now().Sub(f.Created) < table.MinGCAge-time.Minute {
			continue
		}
		_, err := b.Attributes(ctx, f.Key)
		if errors.Is(err, blob.ErrNotFound) {
			lost = append(lost, f.ID)
		} else if err != nil {
			return nil, err
		}
	}
	return lost, nil
}

// GCBoundary returns the newest GC boundary (0: none): versions at or
// below it may have been deleted and must never be created again.
func GCBoundary(ctx context.Context, b blob.Bucket) (uint64, error) {
	page, err := b.ListPage(ctx, table.GCBoundaryDir, "", 1)
	if err != nil {
		return 0, err
	}
	for _, o := range page.Objects {
		if v, ok := table.ParseGCBoundaryKey(o.Key); ok {
			return v, nil
		}
	}
	return 0, nil
}

func backoff(o Options, attempt int) time.Duration {
	d := o.BaseBackoff << min(attempt-1, 20)
	if d > o.MaxBackoff || d <= 0 {
		d = o.MaxBackoff
	}
	return rand.N(d + 1) // full jitter in [0, d]
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}
