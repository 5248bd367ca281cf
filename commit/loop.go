package commit

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/internal/backoff"
	"github.com/stratadb/strata/internal/plant"
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
	// MaxReplans bounds how often a Table operation that plans against a
	// version (Delete, CreateIndex, a Rewrite's caller) plans again after
	// a retryable conflict; 0 means 10. Each plan's commit has its own
	// MaxAttempts and Budget.
	MaxReplans int
	// Budget bounds a commit's wall time; 0 means 30s.
	Budget time.Duration
	// BaseBackoff and MaxBackoff bound the jittered exponential backoff
	// between attempts after a transient failure; 0 means 2ms and 100ms.
	// Losing a race is not a sign of overload (the loser already holds
	// the newest version), so a loser retries at once.
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

// ErrInvalidOptions: an option out of its range, or options that break a
// relation their documentation states (see Options.Validate).
var ErrInvalidOptions = errors.New("commit: invalid options")

// EnsureDefaults returns a copy of o (nil: the zero Options) with every
// unset field at its default. o itself is not changed.
func (o *Options) EnsureDefaults() *Options {
	c := o.withDefaults()
	return &c
}

// Validate checks the options as EnsureDefaults leaves them: no negative
// bounds, BaseBackoff at most MaxBackoff, and StallCheck at most a tenth of
// table.MinGCAge — the garbage collector never removes a manifest younger
// than MinGCAge, so a commit slower than StallCheck must check before that
// can happen. Every function taking *Options calls it.
func (o *Options) Validate() error {
	_, err := o.resolve()
	return err
}

// resolve is what every entry point does with its options: fill in the
// defaults, then check.
func (o *Options) resolve() (Options, error) {
	c := o.withDefaults()
	switch {
	case o != nil && (o.MaxAttempts < 0 || o.MaxReplans < 0 || o.Budget < 0 || o.BaseBackoff < 0 || o.MaxBackoff < 0 || o.StallCheck < 0):
		return Options{}, fmt.Errorf("%w: MaxAttempts, MaxReplans, Budget, BaseBackoff, MaxBackoff and StallCheck must not be negative", ErrInvalidOptions)
	case c.BaseBackoff > c.MaxBackoff:
		return Options{}, fmt.Errorf("%w: BaseBackoff %v is above MaxBackoff %v", ErrInvalidOptions, c.BaseBackoff, c.MaxBackoff)
	case c.StallCheck > table.MinGCAge/10:
		return Options{}, fmt.Errorf("%w: StallCheck %v is above %v, a tenth of the age below which garbage collection keeps every manifest", ErrInvalidOptions, c.StallCheck, table.MinGCAge/10)
	}
	return c, nil
}

func (o *Options) withDefaults() Options {
	var c Options
	if o != nil {
		c = *o
	}
	if c.MaxAttempts <= 0 {
		c.MaxAttempts = 100
	}
	if c.MaxReplans <= 0 {
		c.MaxReplans = 10
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
func Commit(ctx context.Context, b blob.Bucket, base *table.Manifest, txn table.Transaction, opts *Options) (Result, error) {
	o, err := opts.resolve()
	if err != nil {
		return Result{}, err
	}
	if txn.CommitID == "" {
		txn.CommitID = table.NewID()
	}
	if txn.Writer == "" {
		txn.Writer = o.Writer
	}
	start := time.Now()
	// When the newest version was last known, on the options' clock (the
	// stall check compares it with GC's ages): now, for a base read here or
	// caught up with a listing. A base handed in without CatchUp may have
	// been read any time since it was made: no version after it can have
	// been collected while it is younger than GC's least age, so the check
	// counts from when it was made (the writer's clock, never later than
	// now).
	readAt := o.Now()
	if base != nil && !o.CatchUp && base.Timestamp.Before(readAt) {
		readAt = base.Timestamp
	}
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
			return Result{}, collectedBase(txn, err)
		}
		if res, done, _, err := checkRange(ctx, b, &txn, readBase, cur.Version, nil); err != nil || done {
			return res, collectedBase(txn, err)
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
			return Result{}, err
		}
		if latest > cur.Version {
			r, done, newest, err := checkRange(ctx, b, &txn, cur, latest, nil)
			if err != nil || done {
				return r, collectedBase(txn, err)
			}
			cur, readAt = newest, listedAt
		}
	}
	var res Result
	var last error
	storm, stormLosses := false, 0 // see the lost race below
	for res.Attempts < o.MaxAttempts && time.Since(start) < o.Budget {
		next, err := Apply(cur, &txn)
		if errors.Is(err, errNothingLeft) {
			return Result{Version: cur.Version, Done: true, Attempts: res.Attempts, Rebases: res.Rebases}, nil
		}
		var dup *duplicateError
		if errors.As(err, &dup) {
			// The state records our append; believe it once no newer
			// version may have taken it back (see checkDuplicate).
			why, err := checkDuplicate(ctx, b, cur, dup.outcome.At, o)
			switch {
			case err != nil:
				return Result{}, err
			case why == duplicateStands:
				return Result{Version: dup.outcome.At, Done: true, Duplicate: true, Rows: dup.outcome.Rows, Attempts: res.Attempts, Rebases: res.Rebases}, nil
			}
			res.Rebases++
			r, done, newest, err := checkRange(ctx, b, &txn, cur, cur.Version+1, nil)
			if err != nil || done {
				return r, err
			}
			cur = newest
			continue
		}
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
		if errors.Is(err, blob.ErrPermanent) {
			return Result{}, fmt.Errorf("commit %s at v%d: %w", txn.CommitID, next.Version, err)
		}
		if ctx.Err() != nil {
			if errors.Is(err, blob.ErrRetryable) {
				// Canceled while the create was out: it may have landed.
				return Result{}, fmt.Errorf("commit %s at v%d, canceled: %w: %w", txn.CommitID, next.Version, ErrOutcomeUnknown, err)
			}
			return Result{}, fmt.Errorf("commit %s at v%d: %w", txn.CommitID, next.Version, err)
		}
		last = err
		// The point of no return: the create may have landed even though
		// it reported an error (a lost response, or a 412 that an SDK retry
		// of our own request provoked). Read before anything else.
		landed, err := readTransaction(ctx, b, next.Version, o)
		if err != nil && !errors.Is(err, table.ErrVersionNotFound) {
			return Result{}, fmt.Errorf("commit %s: resolving the outcome at v%d: %w: %w", txn.CommitID, next.Version, ErrOutcomeUnknown, err)
		}
		if landed == nil {
			// Nothing there: the request failed before landing, or a 409
			// ConditionalRequestConflict — or it landed (ours or another's)
			// and garbage collection took it since, which only a stall as
			// long as GC's retention allows. Then a newer version exists, or
			// a boundary covers it, and whether ours landed cannot be told.
			collected, err := collectedSince(ctx, b, next.Version, o)
			if err != nil {
				return Result{}, fmt.Errorf("commit %s: resolving the outcome at v%d: %w: %w", txn.CommitID, next.Version, ErrOutcomeUnknown, err)
			}
			if collected {
				return Result{}, fmt.Errorf("commit %s: v%d, whose create may have landed, was collected before its outcome was read: %w", txn.CommitID, next.Version, ErrOutcomeUnknown)
			}
			pause(ctx, o, res.Attempts)
			continue
		}
		if landed.CommitID == txn.CommitID && !plant.On(plant.BlindRetry) {
			// Ours landed; what we wrote is next.
			return finish(ctx, b, &txn, next, res, readAt, o)
		}
		// Someone else holds next.Version: rebase on it alone — its
		// transaction is read already — and try the version after it at
		// once. A writer that lost goes back into the race after one round
		// trip instead of three (LIST, the transaction again, the create),
		// so the one that lost is not the one that keeps losing. Every
		// fourth loss in a row others may be ahead by more than one: then
		// catch up to the newest version with a LIST, checking each commit
		// missed.
		//
		// A loser waits only in a storm: when that LIST showed at least
		// stormVersions versions made after the one it lost, many writers
		// race, and retrying at once only burns the CPU and requests that
		// the winners need. Then it backs off before every attempt and
		// catches up with a LIST each time, until a LIST shows the storm
		// over. Otherwise a pause would only put it behind writers that did
		// not lose: backing off after a losing streak of any length, one of
		// four writers through a 20 ms round trip lost 58 races in a row
		// (7.3 s).
		res.Rebases++
		if storm {
			stormLosses++
			pause(ctx, o, stormLosses)
		}
		if !storm && res.Rebases%4 != 0 {
			r, done, newest, err := checkRange(ctx, b, &txn, cur, next.Version, landed)
			if err != nil || done {
				return r, err
			}
			// readAt stays: only a listing tells that a version was the
			// newest, and the winner's may be an old one that a tag kept
			// while the slot after it was collected during a stall. The
			// stall check measures from the last time the newest was known.
			cur = newest
			continue
		}
		listedAt := o.Now()
		latest, err := table.LatestVersion(ctx, b)
		if err != nil {
			return Result{}, err
		}
		if storm = latest >= next.Version+stormVersions; !storm {
			stormLosses = 0
		}
		latest = max(latest, next.Version)
		r, done, newest, err := checkRange(ctx, b, &txn, cur, latest, landed)
		if err != nil || done {
			return r, err
		}
		cur, readAt = newest, listedAt
	}
	if ctx.Err() != nil {
		return Result{}, ctx.Err()
	}
	return Result{}, &BudgetError{CommitID: txn.CommitID, Attempts: res.Attempts, Last: last}
}

// What checkDuplicate finds of a recorded append.
const (
	duplicateStands = iota // the append is stored, at the recorded version
	duplicateNewer         // a version after the state exists: catch up, look again
	duplicateUndone        // its data is lost: it was taken back (undone) just now
)

// checkDuplicate checks a state's record that an append was stored at
// version at, before a caller is told so: a state read through a lagging
// listing may be older than the version that took the append back (a
// commit that stalled past garbage collection is undone, and its name
// forgotten), and a commit whose writer died before undoing it still
// records its name while its data is gone. So: a version after cur, read
// by name, means catching up first; then the recorded version's fragments
// must be there — if they are lost, the commit is undone here, as its
// writer would have, and the append is to be made anew.
func checkDuplicate(ctx context.Context, b blob.Bucket, cur *table.Manifest, at uint64, o Options) (int, error) {
	var newer bool
	err := retryTransient(ctx, o, func() error {
		_, err := b.Attributes(ctx, table.ManifestKey(cur.Version+1))
		newer = err == nil
		if errors.Is(err, blob.ErrNotFound) {
			return nil
		}
		return err
	})
	if err != nil || newer {
		return duplicateNewer, err
	}
	var m *table.Manifest
	if err := retryTransient(ctx, o, func() (err error) { m, err = table.ReadManifest(ctx, b, at); return err }); err != nil {
		if errors.Is(err, table.ErrVersionNotFound) {
			return duplicateStands, nil // collected: long since stored and kept
		}
		return 0, err
	}
	var lost []uint64
	var undone uint64
	if err := retryTransient(ctx, o, func() (err error) { lost, undone, err = lostFragments(ctx, b, m, o); return err }); err != nil {
		return 0, err
	}
	if len(lost) == 0 && undone == 0 {
		return duplicateStands, nil
	}
	if undone == 0 {
		if err := Undo(ctx, b, m, &o); err != nil && !IsRetryableConflict(err) {
			return 0, fmt.Errorf("v%d, which records an append sent again, lost its data; undoing it failed: %w", at, err)
		}
	}
	return duplicateUndone, nil
}

// stormVersions: a loser whose catch-up finds this many versions made
// after the one it lost is in a storm of writers, and backs off.
const stormVersions = 8

// checkRange checks txn against every commit in (from, to], reading only
// their transactions, and returns the state of version to, rebuilt from
// cur (version from) by replaying them. known, when not nil, is a
// transaction of that range read already (it is not read again).
func checkRange(ctx context.Context, b blob.Bucket, txn *table.Transaction, cur *table.Manifest, to uint64, known *table.Transaction) (Result, bool, *table.Manifest, error) {
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
func collectedBase(txn table.Transaction, err error) error {
	if !errors.Is(err, table.ErrVersionNotFound) {
		return err
	}
	return &ConflictError{Ours: txn, Retryable: true,
		Reason: fmt.Sprintf("versions after v%d were collected before they were read (%v); plan again against the latest", txn.ReadVersion, err)}
}

// readTransaction reads the transaction of version v, retrying transient
// errors briefly: the outcome of an ambiguous create must be known before
// moving on.
func readTransaction(ctx context.Context, b blob.Bucket, v uint64, o Options) (*table.Transaction, error) {
	var t *table.Transaction
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
		_, err := b.Attributes(ctx, table.ManifestKey(v+1))
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

// finish reports success, unless the commit stalled for so long that the
// garbage collector may have removed what it relied on:
//
//   - the version it created (then the manifest is a resurrected,
//     unreachable one: it is deleted), checked when the commit took longer
//     than StallCheck from reading its base (see resurrected);
//   - a fragment it adds, checked when that fragment is older than
//     MinGCAge less a margin (GC deletes unreferenced objects only once
//     older than MinGCAge). A fragment lost before the create landed is
//     removed again by a Rewrite (Undo), so the table stays readable; the
//     commit was not acknowledged, and its caller writes the data again
//     (see lostFragments for a fragment gone after the create landed).
//
// Every request here retries transient errors: giving up would leave the
// outcome unknown, or the table referencing data that is gone.
func finish(ctx context.Context, b blob.Bucket, txn *table.Transaction, m *table.Manifest, res Result, readAt time.Time, o Options) (Result, error) {
	if o.Now().Sub(readAt) > o.StallCheck {
		var why string
		err := retryTransient(ctx, o, func() (err error) { why, err = resurrected(ctx, b, m.Version); return err })
		if err != nil {
			return Result{}, fmt.Errorf("commit %s: checking for a collected version after a stall: %w", txn.CommitID, err)
		}
		if why != "" {
			err := retryTransient(ctx, o, func() error {
				err := b.Delete(ctx, table.ManifestKey(m.Version))
				if errors.Is(err, blob.ErrNotFound) {
					return nil
				}
				return err
			})
			if err != nil {
				return Result{}, fmt.Errorf("commit %s: v%d had been collected (%s), and deleting it again failed: %w", txn.CommitID, m.Version, why, err)
			}
			return Result{}, &ConflictError{Ours: *txn, Version: m.Version, Retryable: true,
				Reason: fmt.Sprintf("stalled past garbage collection: v%d had been collected (%s)", m.Version, why)}
		}
	}
	var lost []uint64
	var undone uint64
	err := retryTransient(ctx, o, func() (err error) { lost, undone, err = lostFragments(ctx, b, m, o); return err })
	if err != nil {
		return Result{}, fmt.Errorf("commit %s: checking its fragments after a stall: %w", txn.CommitID, err)
	}
	if undone > 0 {
		return Result{}, &ConflictError{Ours: *txn, Version: m.Version, Retryable: true, LostData: true,
			Reason: fmt.Sprintf("stalled past garbage collection: fragments were deleted before v%d landed, and a repair undid it at v%d; write the data anew", m.Version, undone)}
	}
	if len(lost) > 0 {
		if err := Undo(ctx, b, m, &o); err != nil {
			return Result{}, fmt.Errorf("commit %s: v%d references fragments %v that garbage collection deleted during a stall, and undoing it failed: %w", txn.CommitID, m.Version, lost, err)
		}
		return Result{}, &ConflictError{Ours: *txn, Version: m.Version, Retryable: true, LostData: true,
			Reason: fmt.Sprintf("stalled past garbage collection: fragments %v were deleted before v%d landed; the commit was undone, write the data anew", lost, m.Version)}
	}
	res.Version, res.Manifest = m.Version, m
	return res, nil
}

// Undo commits a Rewrite that takes back what the commit that made m did
// to the fragments: it removes every fragment it added and puts back every
// fragment it removed (a compaction's sources) as fresh copies of their
// objects, which must still be there. A commit that finds its data taken by garbage collection after
// it landed undoes itself; the compactor undoes such a commit when its
// writer died before it could (see compactor.Repair).
func Undo(ctx context.Context, b blob.Bucket, m *table.Manifest, opts *Options) error {
	o, err := opts.resolve()
	if err != nil {
		return err
	}
	repair := table.Transaction{Kind: table.KindRewrite, Writer: cmp.Or(o.Writer, m.Transaction.Writer), Undoes: m.Version}
	for _, f := range m.Transaction.Added {
		repair.Removed = append(repair.Removed, f.ID)
	}
	if len(m.Transaction.Removed) > 0 {
		var parent *table.Manifest
		err := retryTransient(ctx, o, func() (err error) { parent, err = table.ReadManifest(ctx, b, m.Parent); return err })
		if err != nil {
			return err
		}
		for _, id := range m.Transaction.Removed {
			f := parent.Fragment(id)
			if f == nil {
				return fmt.Errorf("fragment %d of v%d is not in v%d", id, m.Version, m.Parent)
			}
			// A copy, not the object itself: the object is old and no
			// version garbage collection may have read references it, so
			// a collection running now could delete it after this commit
			// lands. A fresh copy is young, safe for the safety age.
			g, err := copyFragment(ctx, b, *f, m.Version, o)
			if err != nil {
				return fmt.Errorf("the fragment %s it replaced: %w", f.Key, err)
			}
			repair.Added = append(repair.Added, g)
		}
	}
	// The repair keeps one commit id across attempts, so an attempt whose
	// outcome was unknown is recognised by the next, never applied twice;
	// it must not give up on a transient error, since until it lands the
	// newest version references data that is gone.
	repair.CommitID = table.NewID()
	o.CatchUp = true
	return retryTransient(ctx, o, func() error {
		_, err := Commit(ctx, b, m, repair, &o)
		return err
	})
}

// copyFragment copies f's data object, and its deletion vector if any, to
// fresh names, retrying transient errors.
func copyFragment(ctx context.Context, b blob.Bucket, f table.Fragment, v uint64, o Options) (table.Fragment, error) {
	copyObject := func(from, to string) error {
		return retryTransient(ctx, o, func() error {
			r, err := b.NewRangeReader(ctx, from, 0, -1)
			if err != nil {
				return err
			}
			defer r.Close()
			return b.Put(ctx, to, r)
		})
	}
	g := f
	g.Key, g.Created = table.NewFragmentKey(), o.Now().UTC()
	if err := copyObject(f.Key, g.Key); err != nil {
		return g, err
	}
	if f.Deletion != nil {
		d := *f.Deletion
		d.Key = table.DeletionKey(f.ID, v)
		if err := copyObject(f.Deletion.Key, d.Key); err != nil {
			return g, err
		}
		g.Deletion = &d
	}
	return g, nil
}

// goneOrDoomed returns which of keys (objects a commit added) are gone, or
// listed in an orphan record — a collection that listed one before the
// commit landed may yet delete it, and the commit must not stand (see
// table.OrphanRecord). Each object is looked for first; records made
// before an object was uploaded cannot name it, and both times are the
// store's (the object's and the records' modification times), so that a
// writer whose clock runs ahead of the store's skips none. The margin
// covers a store whose nodes' clocks disagree a little.
func goneOrDoomed(ctx context.Context, b blob.Bucket, keys []string) (map[string]bool, error) {
	gone := map[string]bool{}
	var since time.Time
	for _, k := range keys {
		attrs, err := b.Attributes(ctx, k)
		switch {
		case errors.Is(err, blob.ErrNotFound):
			gone[k] = true
		case err != nil:
			return nil, err
		case since.IsZero() || attrs.ModTime.Before(since):
			since = attrs.ModTime
		}
	}
	if since.IsZero() { // none is there
		return gone, nil
	}
	records, err := table.OrphanRecords(ctx, b, since.Add(-table.MinGCAge))
	if err != nil {
		return nil, err
	}
	for _, r := range records {
		for _, k := range r.Keys {
			if slices.Contains(keys, k) {
				gone[k] = true
			}
		}
	}
	return gone, nil
}

// lostFragments finds out what became of the fragments the commit that
// made m added, when they are old enough for GC to have taken them and
// are gone. A fragment the newest version still references was taken
// before m landed: it is returned as lost, and the commit must be undone.
// One a later version removed was either folded into a compaction's output
// after m landed (its rows live on: fine), or taken out by a repair that
// undid m (compactor.Repair, when this writer seemed dead): then undone
// is that version. If the versions that would tell were collected, the
// outcome cannot be known, and that is the error. Merged shard
// generations are exempt: GC never deletes a generation above its shard's
// watermark.
func lostFragments(ctx context.Context, b blob.Bucket, m *table.Manifest, o Options) (lost []uint64, undone uint64, err error) {
	if m.Transaction.Kind == table.KindMerge {
		return nil, 0, nil
	}
	var old []table.Fragment
	for _, f := range m.Transaction.Added {
		if f.Created.IsZero() || o.Now().Sub(f.Created) < table.MinGCAge-time.Minute {
			continue
		}
		old = append(old, f)
	}
	if len(old) == 0 {
		return nil, 0, nil
	}
	keys := make([]string, len(old))
	for i, f := range old {
		keys[i] = f.Key
	}
	gone, err := goneOrDoomed(ctx, b, keys)
	if err != nil {
		return nil, 0, err
	}
	var missing []table.Fragment
	for _, f := range old {
		if gone[f.Key] {
			missing = append(missing, f)
		}
	}
	if len(missing) == 0 {
		return nil, 0, nil
	}
	latest, err := table.ReadLatest(ctx, b)
	if err != nil {
		return nil, 0, err
	}
	if latest.Version < m.Version {
		latest = m // a listing that lags behind
	}
	removed := map[uint64]bool{}
	for _, f := range missing {
		if g := latest.Fragment(f.ID); g != nil && g.Key == f.Key {
			lost = append(lost, f.ID)
		} else {
			removed[f.ID] = true
		}
	}
	if len(lost) > 0 || len(removed) == 0 {
		return lost, 0, nil
	}
	gap := false
	for v := m.Version + 1; v <= latest.Version && len(removed) > 0; v++ {
		t, err := table.ReadTransaction(ctx, b, v)
		if errors.Is(err, table.ErrVersionNotFound) {
			gap = true
			continue
		}
		if err != nil {
			return nil, 0, err
		}
		if t.Undoes == m.Version {
			return nil, v, nil
		}
		for _, id := range t.Removed {
			delete(removed, id)
		}
	}
	if len(removed) > 0 && gap {
		return nil, 0, fmt.Errorf("v%d landed, then its fragments were removed and the versions since were collected: whether a compaction kept their rows or a repair took them out cannot be told: %w", m.Version, ErrOutcomeUnknown)
	}
	return nil, 0, nil
}

// resurrected tells whether the manifest at v, just created, brought back
// a version garbage collection had deleted, and if so why it thinks so
// ("" when it did not). Versions are created in order, each by a writer
// that read the one before, so a version above v created before ours
// means v had existed and was collected: ours is a ghost. Garbage
// collection keeps the newest versions, so some version above v exists if
// v was collected. Times come from the store's clock on both objects.
//
//   - v+1 exists: created after ours, it was built on ours; before ours,
//     ours is a ghost. One request, by name (no listing involved).
//   - v+1 does not exist: we are the newest, unless a newer version shows
//     in the listing (then v+1 was collected) or a GC boundary at or above
//     v was created no later than ours.
func resurrected(ctx context.Context, b blob.Bucket, v uint64) (string, error) {
	ours, err := b.Attributes(ctx, table.ManifestKey(v))
	if errors.Is(err, blob.ErrNotFound) {
		return "", nil // collected since: newer versions hold it
	}
	if err != nil {
		return "", err
	}
	next, err := b.Attributes(ctx, table.ManifestKey(v+1))
	if err == nil {
		if next.ModTime.After(ours.ModTime) {
			return "", nil
		}
		return fmt.Sprintf("v%d was created before it", v+1), nil
	}
	if !errors.Is(err, blob.ErrNotFound) {
		return "", err
	}
	latest, err := table.LatestVersion(ctx, b)
	if err != nil {
		return "", err
	}
	if latest > v+1 {
		return fmt.Sprintf("v%d exists and v%d was collected", latest, v+1), nil
	}
	for o, err := range blob.List(ctx, b, table.GCBoundaryDir, 0) {
		if err != nil {
			return "", err
		}
		bv, ok := table.ParseGCBoundaryKey(o.Key)
		if !ok {
			continue
		}
		if bv < v {
			break // boundaries list newest first
		}
		if !o.ModTime.After(ours.ModTime) {
			return fmt.Sprintf("the GC boundary v%d, which covers it, was created before it", bv), nil
		}
	}
	return "", nil
}

// pause waits the loop's backoff before retry n; a context that ends cuts
// it short (the next request then fails with the context's error).
func pause(ctx context.Context, o Options, n int) {
	_ = backoff.Sleep(ctx, backoff.Policy{Base: o.BaseBackoff, Max: o.MaxBackoff}.Delay(n))
}
