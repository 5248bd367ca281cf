package commit

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/table"
	"github.com/stratadb/strata/table/evolve"
	"github.com/stratadb/strata/table/expr"
	"github.com/stratadb/strata/table/format"
	"github.com/stratadb/strata/table/fragment"
)

// Create creates a table in b with schema and, if given, initial rows, as
// version 1. It fails with format.ErrExists when a table is there, and with
// evolve.ErrUnsupportedSchema for a schema Strata cannot store (see
// evolve.CheckStorable), or whose column takes a name reserved for the
// change feed (evolve.ErrReservedName); dictionary-encoded fields are stored as their
// values (evolve.NormalizeSchema). The rows pass evolve.Conform first.
func Create(ctx context.Context, b blob.Bucket, schema *arrow.Schema, config map[string]string, opts *Options, batches ...arrow.RecordBatch) (*format.Manifest, error) {
	m, _, err := create(ctx, b, schema, config, opts, nil, batches)
	return m, err
}

// CreateOnce is Create named by key, safe to call again with the same key
// after an error whose outcome is unknown: when the table's version 1 is
// this create (its key and rows), it answers that version with
// duplicate set instead of format.ErrExists.
func CreateOnce(ctx context.Context, b blob.Bucket, schema *arrow.Schema, config map[string]string, opts *Options, key format.Idempotency, batches ...arrow.RecordBatch) (m *format.Manifest, duplicate bool, err error) {
	if err := key.Check(); err != nil {
		return nil, false, err
	}
	return create(ctx, b, schema, config, opts, &key, batches)
}

func create(ctx context.Context, b blob.Bucket, schema *arrow.Schema, config map[string]string, opts *Options, key *format.Idempotency, batches []arrow.RecordBatch) (*format.Manifest, bool, error) {
	o, err := opts.resolve()
	if err != nil {
		return nil, false, err
	}
	schema = evolve.NormalizeSchema(schema)
	if err := evolve.CheckStorable(schema); err != nil {
		return nil, false, err
	}
	if err := evolve.CheckReservedNames(schema); err != nil {
		return nil, false, err
	}
	batches, err = conformAll(schema, batches)
	if err != nil {
		return nil, false, err
	}
	defer releaseAll(batches)
	var k *format.AppendKey
	if key != nil {
		if k, err = appendKey(*key, schema, batches, o.Now()); err != nil {
			return nil, false, err
		}
	}
	if _, err := table.LatestVersion(ctx, b); err == nil {
		return createdBefore(ctx, b, k, o)
	} else if !errors.Is(err, format.ErrNotFound) {
		return nil, false, err
	}
	schemaIPC, err := evolve.EncodeSchema(schema)
	if err != nil {
		return nil, false, err
	}
	txn := format.Transaction{Kind: format.KindCreate, CommitID: format.NewID(), Writer: o.Writer, SchemaIPC: schemaIPC, Version: 1}
	m := &format.Manifest{
		TableID: format.NewID(), Version: 1, Timestamp: time.Now().UTC(), SchemaIPC: schemaIPC,
		Config: maps.Clone(config), Transaction: txn,
	}
	if len(batches) > 0 {
		f, err := fragment.Write(ctx, b, schema, batches...)
		if err != nil {
			return nil, false, err
		}
		f.ID = 0
		m.Fragments, m.NextFragmentID = []format.Fragment{f}, 1
		m.Transaction.Added = []format.Fragment{f}
	}
	if k != nil {
		m.Transaction.Idempotency = k
		m.Producers = m.Producers.Record(*k, 1, addedRows(&m.Transaction))
	}
	m.Transaction.NextFragmentID, m.Transaction.FragmentCount = m.NextFragmentID, len(m.Fragments)
	if err := format.Refresh(m); err != nil {
		return nil, false, err
	}
	data, err := format.EncodeManifest(m)
	if err != nil {
		return nil, false, err
	}
	err = b.PutIfAbsent(ctx, format.ManifestKey(1), data)
	if err == nil {
		return m, false, nil
	}
	// Ambiguous or lost: whose version 1 is it?
	got, rerr := readTransaction(ctx, b, 1, o)
	if rerr == nil && got.CommitID == txn.CommitID {
		return m, false, nil
	}
	if rerr == nil || errors.Is(err, blob.ErrExists) {
		return createdBefore(ctx, b, k, o)
	}
	return nil, false, fmt.Errorf("commit: create: %w", err)
}

// createdBefore answers a create that found a table: format.ErrExists,
// unless key names the create that made its version 1 — then that version,
// a duplicate (or format.ErrKeyReused, for other rows under the key).
func createdBefore(ctx context.Context, b blob.Bucket, key *format.AppendKey, o Options) (*format.Manifest, bool, error) {
	if key == nil {
		return nil, false, format.ErrExists
	}
	got, err := readTransaction(ctx, b, 1, o)
	if errors.Is(err, format.ErrVersionNotFound) {
		return nil, false, format.ErrExists // collected long since: not a retry within the window
	}
	if err != nil {
		return nil, false, err
	}
	theirs := got.Idempotency
	if theirs == nil || theirs.Producer != key.Producer || theirs.Seq != key.Seq {
		return nil, false, format.ErrExists
	}
	if !key.Matches(theirs.Digest) {
		return nil, false, fmt.Errorf("%w: the table was created with other rows under this key", format.ErrKeyReused)
	}
	m, err := table.ReadManifest(ctx, b, 1)
	if err != nil {
		return nil, false, err
	}
	return m, true, nil
}

// Table is a writer's handle on a table. It remembers the newest version
// it has seen and plans commits against it, so a writer that commits in a
// loop does not re-read the table before each commit; the commit loop
// catches up when others committed meanwhile. Safe for concurrent use.
type Table struct {
	b    blob.Bucket
	opts Options
	mu   struct {
		sync.Mutex
		cur *format.Manifest
		// wonAt: when this handle's last commit made cur, at the first
		// try and with nothing to catch up on (zero otherwise; see Commit),
		// on the options' clock.
		wonAt time.Time
	}
}

// quietCommit: how recent a handle's own uncontended commit must be for
// its next commit to skip the listing of newer versions.
const quietCommit = 2 * time.Second

// OpenTable opens the latest version of the table in b for writing.
func OpenTable(ctx context.Context, b blob.Bucket, opts *Options) (*Table, error) {
	o, err := opts.resolve()
	if err != nil {
		return nil, err
	}
	m, err := table.ReadLatest(ctx, b)
	if err != nil {
		return nil, err
	}
	return OpenTableAt(b, m, &o)
}

// OpenTableAt opens the table in b for writing at version m, read
// already.
func OpenTableAt(b blob.Bucket, m *format.Manifest, opts *Options) (*Table, error) {
	o, err := opts.resolve()
	if err != nil {
		return nil, err
	}
	if err := m.CheckWritable(); err != nil {
		return nil, err
	}
	t := &Table{b: b, opts: o}
	t.mu.cur = m
	return t, nil
}

// Bucket returns the table's bucket.
func (t *Table) Bucket() blob.Bucket { return t.b }

// Current returns the newest version this handle has seen.
func (t *Table) Current() *table.Snapshot {
	t.mu.Lock()
	defer t.mu.Unlock()
	return table.NewSnapshot(t.b, t.mu.cur)
}

// Refresh reads the latest version.
func (t *Table) Refresh(ctx context.Context) (*table.Snapshot, error) {
	m, err := table.ReadLatest(ctx, t.b)
	if err != nil {
		return nil, err
	}
	t.advance(m)
	return table.NewSnapshot(t.b, m), nil
}

func (t *Table) advance(m *format.Manifest) {
	if m == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if m.Version > t.mu.cur.Version {
		t.mu.cur = m
	}
}

func (t *Table) base() *format.Manifest {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.mu.cur
}

// Commit commits a transaction planned against this handle's version.
func (t *Table) Commit(ctx context.Context, txn format.Transaction) (Result, error) {
	base := t.base()
	if txn.ReadVersion == 0 {
		txn.ReadVersion = base.Version
	}
	o := t.opts
	// A listing of newer versions first (one request) unless this
	// handle's last commit, moments ago, met nobody: then its version is
	// most likely still the newest, and a create that loses costs what the
	// listing would have, once.
	t.mu.Lock()
	o.CatchUp = t.mu.wonAt.IsZero() || t.mu.cur != base || o.Now().Sub(t.mu.wonAt) >= quietCommit
	if !o.CatchUp {
		o.KnownAt = t.mu.wonAt
	}
	t.mu.Unlock()
	// What the handle learns by landing at the first try: its version was
	// the newest when the create landed, so no later than when the
	// commit began. (Not when the call returns: the checks after the
	// create may take long, and versions made meanwhile may be collected
	// by the time the next commit skips the listing.)
	began := o.Now()
	res, err := Commit(ctx, t.b, base, txn, &o)
	if err == nil {
		t.advance(res.Manifest)
		t.mu.Lock()
		t.mu.wonAt = time.Time{}
		if res.Manifest != nil && t.mu.cur == res.Manifest && res.Attempts == 1 && res.Rebases == 0 {
			t.mu.wonAt = began
		}
		t.mu.Unlock()
	}
	var ce *ConflictError
	if errors.As(err, &ce) && ce.Theirs.Kind != "" {
		// What is planned next is planned on what ours conflicted with
		// (a schema change, say), not again on what it read.
		_, _ = t.Refresh(ctx)
	}
	return res, err
}

// Append writes batches as one new fragment and commits it: every row or
// none. Each batch first passes evolve.Conform (valid data, the table's
// schema or one that converts without loss, no null where the schema
// forbids one); one that does not is refused before anything is written.
func (t *Table) Append(ctx context.Context, batches ...arrow.RecordBatch) (Result, error) {
	return t.append(ctx, nil, batches)
}

// AppendOnce is Append named by key, safe to call again with the same key
// after an error whose outcome is unknown: an append whose key the table
// records (its rows were stored) stores nothing and answers the first
// one's version, with Result.Duplicate set; the same key with other rows
// fails with format.ErrKeyReused. See format.Idempotency for the window.
func (t *Table) AppendOnce(ctx context.Context, key format.Idempotency, batches ...arrow.RecordBatch) (Result, error) {
	if err := key.Check(); err != nil {
		return Result{}, err
	}
	return t.append(ctx, &key, batches)
}

func (t *Table) append(ctx context.Context, key *format.Idempotency, batches []arrow.RecordBatch) (Result, error) {
	res, err := t.appendConformed(ctx, key, batches)
	return res, t.byName(ctx, err, batches)
}

// byName is err, or, when err is a conflict with a schema change that
// took away a column the rows hold values in, the refusal of the rows by
// the table's newest schema, which names the column.
func (t *Table) byName(ctx context.Context, err error, batches []arrow.RecordBatch) error {
	var ce *ConflictError
	if !errors.As(err, &ce) || ce.Retryable {
		return err
	}
	snap, rerr := t.Refresh(ctx)
	if rerr != nil {
		return err
	}
	conformed, cerr := conformAll(snap.Manifest().Schema(), batches)
	if cerr != nil {
		return cerr
	}
	releaseAll(conformed)
	return err
}

func (t *Table) appendConformed(ctx context.Context, key *format.Idempotency, batches []arrow.RecordBatch) (Result, error) {
	base := t.base()
	base, batches, err := t.conformLatest(ctx, base, batches)
	if err != nil {
		return Result{}, err
	}
	defer releaseAll(batches)
	txn := format.Transaction{Kind: format.KindAppend, CommitID: format.NewID()}
	if key != nil {
		if txn.Idempotency, err = appendKey(*key, base.Schema(), batches, t.opts.Now()); err != nil {
			return Result{}, err
		}
		// Known already: nothing to write, unless a version took it back
		// (see checkDuplicate). A key recorded after the version this
		// handle holds is found when the commit catches up.
		o, found, err := base.Producers.Lookup(*txn.Idempotency)
		if err != nil {
			return Result{}, err
		}
		if found {
			why, err := checkDuplicate(ctx, t.b, base, *txn.Idempotency, o.At, t.opts)
			if err != nil || why == duplicateStands {
				return Result{Version: o.At, Done: true, Duplicate: true, Rows: o.Rows}, err
			}
		}
	}
	f, err := fragment.Write(ctx, t.b, base.Schema(), batches...)
	if err != nil {
		return Result{}, err
	}
	txn.Added = []format.Fragment{f}
	return t.drive(ctx, driveOptions{fromHandle: true, sameCommit: true}, func(ctx context.Context, _ *table.Snapshot, prev error) (Plan, error) {
		// An append plans again by rebasing on the latest version (after
		// a stall past GC, say); its data object stays as written, unless
		// garbage collection took it while the append stalled.
		var ce *ConflictError
		if errors.As(prev, &ce) && ce.LostData {
			f, err := fragment.Write(ctx, t.b, base.Schema(), batches...)
			if err != nil {
				return Plan{}, err
			}
			txn.Added = []format.Fragment{f}
			txn.CommitID = format.NewID()
		}
		return Plan{Txn: txn}, nil
	})
}

// appendKey is key as a transaction records it, with the rows' digest
// when the key names none.
func appendKey(key format.Idempotency, schema *arrow.Schema, batches []arrow.RecordBatch, now time.Time) (*format.AppendKey, error) {
	k, err := key.DigestRows(schema, batches, now)
	if err != nil {
		return nil, err
	}
	return &k, nil
}

// Delete deletes the live rows matching pred, recording deletion vectors.
// On a retryable conflict it re-plans against the newer version, up to
// the handle's MaxReplans times.
func (t *Table) Delete(ctx context.Context, pred expr.Predicate) (Result, int64, error) {
	var deleted int64
	res, err := t.drive(ctx, driveOptions{}, func(ctx context.Context, snap *table.Snapshot, _ error) (Plan, error) {
		matches, err := snap.MatchingRows(ctx, pred)
		if err != nil {
			return Plan{}, err
		}
		p := Plan{Txn: format.Transaction{Kind: format.KindDelete, CommitID: format.NewID(), ReadVersion: snap.Version()},
			written: t.opts.Now(), bodies: map[string][]byte{}}
		deleted = 0
		for _, id := range slices.Sorted(maps.Keys(matches)) { // in order: the same requests every time
			rows := matches[id]
			f := snap.Manifest().Fragment(id)
			key := format.DeletionKey(id, snap.Version()+1)
			p.bodies[key] = format.EncodeDeletions(rows)
			if err := t.b.PutIfAbsent(ctx, key, p.bodies[key]); err != nil {
				return Plan{}, err
			}
			before := int64(0)
			if f.Deletion != nil {
				before = f.Deletion.Count
			}
			deleted += int64(len(rows)) - before
			p.Txn.Deletions = append(p.Txn.Deletions, format.FragmentDeletion{FragmentID: id, Deletion: format.Deletion{Key: key, Count: int64(len(rows))}})
		}
		p.Done = len(p.Txn.Deletions) == 0
		return p, nil
	})
	switch {
	case err != nil:
		return Result{}, 0, err
	case res.Done:
		return res, 0, nil
	}
	return res, deleted, nil
}

// undoneSince returns the version after v, up to latest, whose
// transaction takes v back (0: none).
func (t *Table) undoneSince(ctx context.Context, v, latest uint64) (uint64, error) {
	return undoneBetween(ctx, t.b, v, latest, t.opts)
}

// undoneBetween returns the version after v, up to latest, that takes v
// back (Transaction.Undoes), or 0.
func undoneBetween(ctx context.Context, b blob.Bucket, v, latest uint64, o Options) (uint64, error) {
	for u := v + 1; u <= latest; u++ {
		var txn *format.Transaction
		err := retryTransient(ctx, o, func() (err error) { txn, err = table.ReadTransaction(ctx, b, u); return err })
		if errors.Is(err, format.ErrVersionNotFound) {
			continue // collected: it cannot be newer than a repair that matters
		}
		if err != nil {
			return 0, err
		}
		if txn.Undoes == v {
			return u, nil
		}
	}
	return 0, nil
}

// commitKeeping commits txn, whose deletion vectors (bodies, written at
// written) it then keeps in place past a stall (keepDeletions): the tail
// every verb's commit shares (a txn without vectors: the commit alone).
func (t *Table) commitKeeping(ctx context.Context, txn format.Transaction, bodies map[string][]byte, written time.Time) (Result, error) {
	res, err := t.Commit(ctx, txn)
	if err != nil || res.Duplicate || len(txn.Deletions) == 0 {
		return res, err
	}
	return t.keepDeletions(ctx, res, txn.Deletions, bodies, written)
}

// Overwrite replaces every row (and possibly the schema) with batches. The
// schema and rows are checked as Create checks them.
func (t *Table) Overwrite(ctx context.Context, schema *arrow.Schema, batches ...arrow.RecordBatch) (Result, error) {
	schema = evolve.NormalizeSchema(schema)
	if err := evolve.CheckStorable(schema); err != nil {
		return Result{}, err
	}
	if err := evolve.CheckReservedNames(schema); err != nil {
		return Result{}, err
	}
	batches, err := conformAll(schema, batches)
	if err != nil {
		return Result{}, err
	}
	defer releaseAll(batches)
	schemaIPC, err := evolve.EncodeSchema(schema)
	if err != nil {
		return Result{}, err
	}
	txn := format.Transaction{Kind: format.KindOverwrite, CommitID: format.NewID(), SchemaIPC: schemaIPC}
	if len(batches) > 0 {
		f, err := fragment.Write(ctx, t.b, schema, batches...)
		if err != nil {
			return Result{}, err
		}
		txn.Added = []format.Fragment{f}
	}
	return t.Commit(ctx, txn)
}

// CreateIndex builds a key index on an integer, string or binary column
// (such as an id or a UUID; table.Snapshot.BuildIndex) from the latest
// version and commits it. Take then finds rows by key with
// ranged reads of the row groups that hold them. A Rewrite or Delete that
// lands while the index is built makes it build again, up to MaxReplans
// times. Rebuilding the index folds in the remap entries compactions left.
func (t *Table) CreateIndex(ctx context.Context, column string) (Result, error) {
	return t.drive(ctx, driveOptions{}, func(ctx context.Context, snap *table.Snapshot, _ error) (Plan, error) {
		if len(snap.Manifest().ClusterBy) > 0 {
			return Plan{}, fmt.Errorf("%w: %w", expr.ErrBadColumns, ErrClusteredIndex)
		}
		obj, err := snap.BuildIndex(ctx, column)
		if err != nil {
			return Plan{}, err
		}
		id := format.NewID()
		ix := format.Index{ID: id, Column: column, Key: format.IndexKey(id), Rows: obj.Rows,
			CoveredBelow: snap.Manifest().NextFragmentID, Directory: obj.Directory, Blocks: obj.Blocks}
		if err := t.b.PutIfAbsent(ctx, ix.Key, obj.Data); err != nil {
			return Plan{}, err
		}
		// An index object is as large as the column: one a conflict
		// leaves unreferenced goes at once, not at garbage collection.
		discard := func() {
			ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
			defer cancel()
			_ = t.b.Delete(ctx, ix.Key)
		}
		return Plan{Txn: format.Transaction{Kind: format.KindCreateIndex, CommitID: format.NewID(), ReadVersion: snap.Version(), Index: &ix}, Discard: discard}, nil
	})
}

func releaseAll(recs []arrow.RecordBatch) {
	for _, r := range recs {
		r.Release()
	}
}
