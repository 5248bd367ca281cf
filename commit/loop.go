package commit

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/internal/backoff"
	"github.com/stratadb/strata/internal/plant"
	"github.com/stratadb/strata/table"
	"github.com/stratadb/strata/table/evolve"
	"github.com/stratadb/strata/table/format"
)

// Result describes a commit that succeeded.
type Result struct {
	Version  uint64           // the version that holds the commit
	Manifest *format.Manifest // that version's manifest (nil when Done)
	Attempts int              // conditional creates tried
	Rebases  int              // times the loop caught up with newer versions
	// Done is true when no manifest was written because a newer commit
	// already covered ours (a merge of the same shard, or the same
	// idempotent append); Version is then the version that did.
	Done bool
	// Duplicate: the transaction's idempotency key was recorded already:
	// Version (and Rows) are the first append's, and nothing was stored.
	Duplicate bool
	Rows      int64
}

// Commit commits txn on top of base (nil: the latest version) and returns
// the version that holds it. The transaction's data objects must already
// be in the bucket. A zero CommitID is filled in with a fresh ULID.
func Commit(ctx context.Context, b blob.Bucket, base *format.Manifest, txn format.Transaction, opts *Options) (Result, error) {
	o, err := opts.resolve()
	if err != nil {
		return Result{}, err
	}
	if txn.CommitID == "" {
		txn.CommitID = format.NewID()
	}
	if txn.Writer == "" {
		txn.Writer = o.Writer
	}
	start := time.Now()
	l := &loop{b: b, txn: &txn, o: o}
	if res, stop, err := l.begin(ctx, base); stop {
		return res, err
	}
	for l.res.Attempts < o.MaxAttempts && time.Since(start) < o.Budget {
		if res, stop, err := l.attempt(ctx); stop {
			return res, err
		}
	}
	if ctx.Err() != nil {
		return Result{}, ctx.Err()
	}
	return Result{}, &BudgetError{CommitID: txn.CommitID, Attempts: l.res.Attempts, Last: l.last}
}

// loop is one Commit's state between attempts. Each step returns stop
// when Commit is to return what it returned.
type loop struct {
	b   blob.Bucket
	txn *format.Transaction
	o   Options
	cur *format.Manifest // the state the next attempt applies txn to
	// readAt: when the newest version was last known, on the options'
	// clock (the stall check compares it with GC's ages).
	readAt      time.Time
	res         Result // attempts and rebases so far
	last        error  // the last create's error
	storm       bool   // see lost
	stormLosses int
}

// begin finds the state the first attempt applies the transaction to:
// base, or the latest version, caught up with versions the transaction
// did not read.
func (l *loop) begin(ctx context.Context, base *format.Manifest) (Result, bool, error) {
	b, o, txn := l.b, l.o, l.txn
	// When the newest version was last known: now, for a base read here or
	// caught up with a listing. A base handed in without CatchUp may have
	// been read any time since it was made: no version after it can have
	// been collected while it is younger than GC's least age, so the check
	// counts from when it was made (the writer's clock, never later than
	// now).
	l.readAt = o.Now()
	switch {
	case base == nil || o.CatchUp:
	case !o.KnownAt.IsZero():
		if o.KnownAt.Before(l.readAt) {
			l.readAt = o.KnownAt
		}
	case base.Timestamp.Before(l.readAt):
		l.readAt = base.Timestamp
	}
	l.cur = base
	if l.cur == nil {
		var err error
		if l.cur, err = table.ReadLatest(ctx, b); err != nil {
			return Result{}, true, err
		}
	}
	if txn.ReadVersion == 0 {
		txn.ReadVersion = l.cur.Version
	}
	// Versions above ReadVersion that cur already includes must be checked.
	if l.cur.Version > txn.ReadVersion {
		readBase, err := table.ReadManifest(ctx, b, txn.ReadVersion)
		if err != nil {
			return Result{}, true, collectedBase(*txn, err)
		}
		if res, done, _, err := checkRange(ctx, b, txn, readBase, l.cur.Version, nil); err != nil || done {
			return res, true, collectedBase(*txn, err)
		}
	}
	if o.CatchUp {
		// One LIST, and the transactions of any versions we lack: far
		// cheaper than a conditional create that is sure to lose. What we
		// know is as old as the LIST, not as the reads after it: a stall
		// while reading the versions it showed is a stall all the same.
		listedAt := o.Now()
		latest, err := table.LatestVersion(ctx, b)
		if err != nil {
			return Result{}, true, err
		}
		if latest > l.cur.Version {
			r, done, newest, err := checkRange(ctx, b, txn, l.cur, latest, nil)
			if err != nil || done {
				return r, true, collectedBase(*txn, err)
			}
			l.cur, l.readAt = newest, listedAt
		}
	}
	return Result{}, false, nil
}

// attempt applies the transaction to the current state and tries to
// create the next version with it.
func (l *loop) attempt(ctx context.Context) (Result, bool, error) {
	b, o, txn := l.b, l.o, l.txn
	txn.Time = o.Now().UTC()
	next, err := Apply(l.cur, txn)
	if errors.Is(err, errNothingLeft) {
		return Result{Version: l.cur.Version, Done: true, Attempts: l.res.Attempts, Rebases: l.res.Rebases}, true, nil
	}
	var dup *duplicateError
	if errors.As(err, &dup) {
		return l.duplicate(ctx, dup)
	}
	if err != nil {
		return Result{}, true, err
	}
	data, err := format.EncodeManifest(next)
	if err != nil {
		return Result{}, true, err
	}
	if id := evolve.SchemaID(next.Schema()); id > evolve.SchemaID(l.cur.Schema()) {
		// The marker before the commit: a shard that finds it absent
		// knows no commit raised the schema before it looked (see
		// evolve.SchemaLease).
		if err := evolve.MarkSchema(ctx, b, id); err != nil {
			return Result{}, true, fmt.Errorf("commit %s at v%d: %w", txn.CommitID, next.Version, err)
		}
	}
	l.res.Attempts++
	err = b.PutIfAbsent(ctx, format.ManifestKey(next.Version), data)
	if err == nil {
		res, err := finish(ctx, b, txn, next, l.res, l.readAt, o)
		return res, true, err
	}
	if errors.Is(err, blob.ErrPermanent) {
		return Result{}, true, fmt.Errorf("commit %s at v%d: %w", txn.CommitID, next.Version, err)
	}
	if ctx.Err() != nil {
		if errors.Is(err, blob.ErrRetryable) {
			// Canceled while the create was out: it may have landed.
			return Result{}, true, fmt.Errorf("commit %s at v%d, canceled: %w: %w", txn.CommitID, next.Version, ErrOutcomeUnknown, err)
		}
		return Result{}, true, fmt.Errorf("commit %s at v%d: %w", txn.CommitID, next.Version, err)
	}
	l.last = err
	// The point of no return: the create may have landed even though
	// it reported an error (a lost response, or a 412 that an SDK retry
	// of our own request provoked). Read before anything else.
	landed, err := readTransaction(ctx, b, next.Version, o)
	if err != nil && !errors.Is(err, format.ErrVersionNotFound) {
		return Result{}, true, fmt.Errorf("commit %s: resolving the outcome at v%d: %w: %w", txn.CommitID, next.Version, ErrOutcomeUnknown, err)
	}
	if landed == nil {
		// Nothing there: the request failed before landing, or a 409
		// ConditionalRequestConflict — or it landed (ours or another's)
		// and garbage collection took it since, which only a stall as
		// long as GC's retention allows. Then a newer version exists, or
		// a boundary covers it, and whether ours landed cannot be told.
		collected, err := collectedSince(ctx, b, next.Version, o)
		if err != nil {
			return Result{}, true, fmt.Errorf("commit %s: resolving the outcome at v%d: %w: %w", txn.CommitID, next.Version, ErrOutcomeUnknown, err)
		}
		if collected {
			return Result{}, true, fmt.Errorf("commit %s: v%d, whose create may have landed, was collected before its outcome was read: %w", txn.CommitID, next.Version, ErrOutcomeUnknown)
		}
		pause(ctx, o, l.res.Attempts)
		return Result{}, false, nil
	}
	if landed.CommitID == txn.CommitID && !plant.On(plant.BlindRetry) {
		// Ours landed; what we wrote is next.
		res, err := finish(ctx, b, txn, next, l.res, l.readAt, o)
		return res, true, err
	}
	return l.lost(ctx, next, landed)
}

// duplicate handles a state that records the transaction's append: believe
// it unless a version took it back (see checkDuplicate), else catch up by
// one version, towards the one that forgot its name.
func (l *loop) duplicate(ctx context.Context, dup *duplicateError) (Result, bool, error) {
	why, err := checkDuplicate(ctx, l.b, l.cur, *l.txn.Idempotency, dup.outcome.At, l.o)
	switch {
	case err != nil:
		return Result{}, true, err
	case why == duplicateStands:
		return Result{Version: dup.outcome.At, Done: true, Duplicate: true, Rows: dup.outcome.Rows, Attempts: l.res.Attempts, Rebases: l.res.Rebases}, true, nil
	}
	l.res.Rebases++
	r, done, newest, err := checkRange(ctx, l.b, l.txn, l.cur, l.cur.Version+1, nil)
	if err != nil || done {
		return r, true, err
	}
	l.cur = newest
	return Result{}, false, nil
}

// lost handles a lost race: someone else holds next.Version, whose
// transaction landed is.
//
// Rebase on it alone — its transaction is read already — and try the
// version after it at once. A writer that lost goes back into the race
// after one round trip instead of three (LIST, the transaction again, the
// create), so the one that lost is not the one that keeps losing. Every
// fourth loss in a row others may be ahead by more than one: then catch up
// to the newest version with a LIST, checking each commit missed.
//
// A loser waits only in a storm: when that LIST showed at least
// stormVersions versions made after the one it lost, many writers race,
// and retrying at once only burns the CPU and requests that the winners
// need. Then it backs off before every attempt and catches up with a LIST
// each time, until a LIST shows the storm over. Otherwise a pause would
// only put it behind writers that did not lose: backing off after a losing
// streak of any length, one of four writers through a 20 ms round trip
// lost 58 races in a row (7.3 s).
func (l *loop) lost(ctx context.Context, next *format.Manifest, landed *format.Transaction) (Result, bool, error) {
	b, o, txn := l.b, l.o, l.txn
	l.res.Rebases++
	if l.storm {
		l.stormLosses++
		pause(ctx, o, l.stormLosses)
	}
	if !l.storm && l.res.Rebases%4 != 0 {
		r, done, newest, err := checkRange(ctx, b, txn, l.cur, next.Version, landed)
		if err != nil || done {
			return r, true, err
		}
		// readAt stays: only a listing tells that a version was the
		// newest, and the winner's may be an old one that a tag kept
		// while the slot after it was collected during a stall. The
		// stall check measures from the last time the newest was known.
		l.cur = newest
		return Result{}, false, nil
	}
	listedAt := o.Now()
	latest, err := table.LatestVersion(ctx, b)
	if err != nil {
		return Result{}, true, err
	}
	if l.storm = latest >= next.Version+stormVersions; !l.storm {
		l.stormLosses = 0
	}
	latest = max(latest, next.Version)
	r, done, newest, err := checkRange(ctx, b, txn, l.cur, latest, landed)
	if err != nil || done {
		return r, true, err
	}
	l.cur, l.readAt = newest, listedAt
	return Result{}, false, nil
}

// stormVersions: a loser whose catch-up finds this many versions made
// after the one it lost is in a storm of writers, and backs off.
const stormVersions = 8

// checkRange checks txn against every commit in (from, to], reading only
// their transactions, and returns the state of version to, rebuilt from
// cur (version from) by replaying them. known, when not nil, is a
// transaction of that range read already (it is not read again).
func checkRange(ctx context.Context, b blob.Bucket, txn *format.Transaction, cur *format.Manifest, to uint64, known *format.Transaction) (Result, bool, *format.Manifest, error) {
	for v := cur.Version + 1; v <= to; v++ {
		theirs := known
		if theirs == nil || theirs.Version != v {
			var err error
			if theirs, err = table.ReadTransaction(ctx, b, v); err != nil {
				return Result{}, false, nil, err
			}
		}
		if theirs.CommitID == txn.CommitID && !plant.On(plant.BlindRetry) {
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

// collectedBase turns the absence of a version between the base and the
// latest — collected while the caller held its base (a writer idle for
// longer than GC's retention) — into a retryable conflict: what those
// versions did cannot be checked against ours, so the caller plans again
// against the latest version (Table does so by itself). Other errors pass.
func collectedBase(txn format.Transaction, err error) error {
	if !errors.Is(err, format.ErrVersionNotFound) {
		return err
	}
	return &ConflictError{Ours: txn, Retryable: true,
		Reason: fmt.Sprintf("versions after v%d were collected before they were read (%v); plan again against the latest", txn.ReadVersion, err)}
}

// readTransaction reads the transaction of version v, retrying transient
// errors briefly: the outcome of an ambiguous create must be known before
// moving on.
func readTransaction(ctx context.Context, b blob.Bucket, v uint64, o Options) (*format.Transaction, error) {
	var t *format.Transaction
	err := retryTransient(ctx, o, func() (err error) { t, err = table.ReadTransaction(ctx, b, v); return err })
	return t, err
}

// collectedSince tells whether version v, found missing, had been created
// and collected: the version after it exists (versions are created in
// order), or a GC boundary covers it. Both are read by name or by one
// listing of one key; the version after is read by name so that a listing
// that lags cannot hide it.
func collectedSince(ctx context.Context, b blob.Bucket, v uint64, o Options) (bool, error) {
	var collected bool
	err := retryTransient(ctx, o, func() error {
		_, err := b.Attributes(ctx, format.ManifestKey(v+1))
		if err == nil {
			collected = true
			return nil
		}
		if !errors.Is(err, blob.ErrNotFound) {
			return err
		}
		boundary, err := table.GCBoundary(ctx, b)
		collected = err == nil && boundary >= v
		return err
	})
	return collected, err
}

// retryTransient runs op until it succeeds or fails for good, retrying
// transient errors for as long as a commit's Budget from the first try
// (and at least 10 times). What follows a create that may have landed
// must not give up while the store is briefly away — a restart, a
// failover: the commit's outcome, or whether it relies on data garbage
// collection took, hangs on it.
func retryTransient(ctx context.Context, o Options, op func() error) error {
	return backoff.RetryFor(ctx, backoff.Policy{Base: o.BaseBackoff, Max: o.MaxBackoff}, 10, o.Budget, blob.IsRetryable, op)
}

// pause waits the loop's backoff before retry n; a context that ends cuts
// it short (the next request then fails with the context's error).
func pause(ctx context.Context, o Options, n int) {
	_ = backoff.Sleep(ctx, backoff.Policy{Base: o.BaseBackoff, Max: o.MaxBackoff}.Delay(n))
}
