package compactor

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/commit"
	"github.com/stratadb/strata/table"
	"github.com/stratadb/strata/table/format"
)

// ErrMissingData: the newest version references data that is gone, and
// nothing proves the commit that added it was never acknowledged, so it is
// not undone: an operator restores the objects or drops them (DropMissing).
// Nothing is deleted while it lasts. The same error as format.ErrMissingData.
var ErrMissingData = format.ErrMissingData

// RepairResult says what a repair found and did.
type RepairResult struct {
	Missing []string // keys of the newest version's objects that are gone
	Undone  []uint64 // versions whose commits were taken back
	// Rewritten are the deletion vectors of merges of shards' upserts
	// written again (see redoMergeVector).
	Rewritten []string
}

// Repair makes the newest version readable again when data objects it
// references are gone, in the one case where that loses nothing: a writer
// stalled longer than garbage collection's safety age, its upload was
// collected as an orphan, its manifest landed anyway, and the writer died
// before it could undo its own commit (commit.Undo), which it does when it
// lives. The proof is an orphan record listing the object, created before
// the commit's manifest (see format.OrphanRecord): such a commit was never
// acknowledged, and undoing it takes its fragments out of the table and,
// for a compaction, puts its sources back.
//
// Every other missing object — deleted by hand, lost by the store, or
// added by a shard merge, whose rows were acknowledged in the WAL — is
// reported as a *format.MissingDataError (errors.Is ErrMissingData) naming
// the objects and the versions that added them, and nothing is undone.
//
// exists reports whether a key is in the bucket; nil checks each object of
// the newest version with a request. A key it calls missing is checked
// again by name before anything is decided, so a listing that lags behind
// recent creates cannot make a present object look lost.
func Repair(ctx context.Context, b blob.Bucket, opts *commit.Options, exists func(key string) bool) (RepairResult, error) {
	var res RepairResult
	m, missing, err := findMissing(ctx, b, exists)
	if err != nil || len(missing) == 0 {
		return res, err
	}
	for _, f := range missing {
		res.Missing = append(res.Missing, f.Key)
	}
	records, err := format.OrphanRecords(ctx, b, time.Time{})
	if err != nil {
		return res, err
	}
	orphaned := map[string]time.Time{} // key → the earliest record listing it
	for _, r := range records {
		for _, k := range r.Keys {
			if t, ok := orphaned[k]; !ok || r.When.Before(t) {
				orphaned[k] = r.When
			}
		}
	}
	// Walk back, by transactions alone, to the commit that added each
	// missing fragment.
	want := map[uint64]format.Fragment{}
	var unproven []string
	var vectors []format.Fragment
	for _, f := range missing {
		if strings.HasPrefix(f.Key, format.DeletionsDir) {
			vectors = append(vectors, f)
			continue
		}
		want[f.ID] = f
	}
	if unproven, err = repairVectors(ctx, b, m, vectors, orphaned, opts, &res); err != nil {
		return res, err
	}
	for v := m.Version; v > 0 && len(want) > 0; v-- {
		t, err := table.ReadTransaction(ctx, b, v)
		if errors.Is(err, format.ErrVersionNotFound) {
			break // collected: what added the rest cannot be read
		}
		if err != nil {
			return res, err
		}
		var mine []format.Fragment
		for _, f := range t.Added {
			if g, ok := want[f.ID]; ok {
				mine = append(mine, g)
				delete(want, f.ID)
			}
		}
		if len(mine) == 0 || slices.Contains(res.Undone, v) {
			continue // (an upsert taken back whole for its vector took its fragment with it)
		}
		proven, why, err := neverAcknowledged(ctx, b, v, t, mine, orphaned)
		if err != nil {
			return res, err
		}
		if !proven {
			for _, f := range mine {
				unproven = append(unproven, fmt.Sprintf("%s (fragment %d, added by v%d, a %s: %s)", f.Key, f.ID, v, t.Kind, why))
			}
			continue
		}
		cur, err := table.ReadManifest(ctx, b, v)
		if err != nil {
			return res, err
		}
		if err := commit.Undo(ctx, b, cur, opts); err != nil {
			return res, fmt.Errorf("compactor: undoing v%d, whose data garbage collection took before it landed: %w", v, err)
		}
		res.Undone = append(res.Undone, v)
	}
	for _, f := range want {
		unproven = append(unproven, fmt.Sprintf("%s (fragment %d, added by a version already collected)", f.Key, f.ID))
	}
	if len(unproven) > 0 {
		slices.Sort(unproven)
		return res, &format.MissingDataError{Version: m.Version, Keys: unprovenKeys(unproven),
			Detail: "nothing proves the commits that added them were never acknowledged, so they are not undone: " + strings.Join(unproven, "; ")}
	}
	return res, nil
}

// repairVectors repairs the missing deletion vectors of the newest
// version m: a merge's written again, a delete never acknowledged taken
// back (an upsert once, whatever number of its vectors are gone). It
// records what it did in res and returns the vectors it could not repair,
// and why.
func repairVectors(ctx context.Context, b blob.Bucket, m *format.Manifest, vectors []format.Fragment, orphaned map[string]time.Time, opts *commit.Options, res *RepairResult) ([]string, error) {
	var unproven []string
	for _, f := range vectors {
		if done, why, err := redoMergeVector(ctx, b, m, f, opts); err != nil {
			return unproven, err
		} else if done {
			res.Rewritten = append(res.Rewritten, f.Key)
			continue
		} else if why != "" {
			unproven = append(unproven, fmt.Sprintf("%s (the deletion vector of fragment %d: %s)", f.Key, f.ID, why))
			continue
		}
		v, why, err := undoDelete(ctx, b, m, f, orphaned, res.Undone, opts)
		if err != nil {
			return unproven, err
		}
		if why != "" {
			unproven = append(unproven, fmt.Sprintf("%s (the deletion vector of fragment %d: %s)", f.Key, f.ID, why))
			continue
		}
		if !slices.Contains(res.Undone, v) {
			res.Undone = append(res.Undone, v)
		}
	}
	return unproven, nil
}

// undoDelete takes back the delete that gave fragment f (of the newest
// version m) its deletion vector, f.Key, which is gone — when that delete
// provably was never acknowledged: an orphan record created before its
// manifest lists the vector (its writer, stalled past the safety age,
// would have seen the record and written the vector again; it died
// first). The fragment gets back the vector it had before, which must
// still be there; the delete's rows are live again, as its writer was
// told nothing. It returns the delete's version, or why nothing was done.
// A version in undone (taken back already by this repair: an upsert whose
// vectors on several fragments are gone) is returned as it is.
func undoDelete(ctx context.Context, b blob.Bucket, m *format.Manifest, f format.Fragment, orphaned map[string]time.Time, undone []uint64, opts *commit.Options) (uint64, string, error) {
	var v uint64
	var t *format.Transaction
	for u := m.Version; u > 0 && v == 0; u-- {
		txn, err := table.ReadTransaction(ctx, b, u)
		if errors.Is(err, format.ErrVersionNotFound) {
			return 0, "the delete that wrote it was already collected", nil
		}
		if err != nil {
			return 0, "", err
		}
		for _, d := range txn.Deletions {
			if d.FragmentID == f.ID && d.Deletion.Key == f.Key {
				v, t = u, txn
			}
		}
	}
	if v == 0 {
		return 0, "no delete wrote it", nil
	}
	if slices.Contains(undone, v) {
		return v, "", nil
	}
	proven, why, err := neverAcknowledged(ctx, b, v, t, []format.Fragment{f}, orphaned)
	if err != nil || !proven {
		return 0, why, err
	}
	if t.Kind == format.KindUpsert || t.Kind == format.KindUpdate {
		// An upsert (an update) is taken back whole: its rows out, every vector it
		// gave back to what it was.
		cur, err := table.ReadManifest(ctx, b, v)
		if errors.Is(err, format.ErrVersionNotFound) {
			return 0, "the upsert that wrote it was already collected", nil
		}
		if err != nil {
			return 0, "", err
		}
		if err := commit.Undo(ctx, b, cur, opts); err != nil {
			return 0, "", fmt.Errorf("compactor: taking back v%d, an upsert whose deletion vector garbage collection took before it landed: %w", v, err)
		}
		return v, "", nil
	}
	before, err := table.ReadManifest(ctx, b, v-1)
	if errors.Is(err, format.ErrVersionNotFound) {
		return 0, "the version before the delete was already collected", nil
	}
	if err != nil {
		return 0, "", err
	}
	prev := before.Fragment(f.ID)
	if prev == nil {
		return 0, "the fragment was not in the version before the delete", nil
	}
	var del format.Deletion
	if prev.Deletion != nil {
		if _, err := b.Attributes(ctx, prev.Deletion.Key); errors.Is(err, blob.ErrNotFound) {
			return 0, "the vector it replaced is gone too", nil
		} else if err != nil {
			return 0, "", err
		}
		del = *prev.Deletion
	} else {
		del = format.Deletion{Key: format.DeletionKey(f.ID, m.Version+1)}
		if err := b.PutIfAbsent(ctx, del.Key, format.EncodeDeletions(nil)); err != nil {
			return 0, "", err
		}
	}
	o := commit.Options{}
	if opts != nil {
		o = *opts
	}
	o.CatchUp = true
	txn := format.Transaction{Kind: format.KindDelete, Undoes: v, Writer: cmp.Or(o.Writer, "repair"),
		Deletions: []format.FragmentDeletion{{FragmentID: f.ID, Deletion: del}}}
	if _, err := commit.Commit(ctx, b, m, txn, &o); err != nil {
		return 0, "", fmt.Errorf("compactor: taking back v%d, whose deletion vector garbage collection took before it landed: %w", v, err)
	}
	return v, "", nil
}

// redoMergeVector writes again the deletion vector f.Key of fragment f.ID,
// gone, when a merge of a shard's upserts wrote it (a merge stalled past
// garbage collection's safety age, its vector collected as an orphan, and
// it died before writing it again; its rows were acknowledged in the
// shard's WAL, so it is not taken back): the vector is the one the
// fragment had in the version before the merge, with the rows whose keys
// the merge's rows hold — what the merge computed (the conflict matrix
// let nothing change the fragment between its plan and its commit). The
// fragment points at the copy in a commit of kind delete. done is false,
// with why, when that cannot be told; done and why both empty when f's
// vector was not a merge's.
func redoMergeVector(ctx context.Context, b blob.Bucket, m *format.Manifest, f format.Fragment, opts *commit.Options) (done bool, why string, err error) {
	var v uint64
	var t *format.Transaction
	born := false // the vector came with the fragment: a merge's drops of named copies
	for u := m.Version; u > 0 && v == 0; u-- {
		txn, err := table.ReadTransaction(ctx, b, u)
		if errors.Is(err, format.ErrVersionNotFound) {
			return false, "", nil // undoDelete says why
		}
		if err != nil {
			return false, "", err
		}
		for _, d := range txn.Deletions {
			if d.FragmentID == f.ID && d.Deletion.Key == f.Key {
				v, t = u, txn
			}
		}
		for _, a := range txn.Added {
			if a.ID == f.ID && a.Deletion != nil && a.Deletion.Key == f.Key {
				v, t, born = u, txn, true
			}
		}
	}
	if v > 0 && born && t.Kind == format.KindMerge {
		return redoNamedVector(ctx, b, m, f, v, t, opts)
	}
	if v == 0 || t.Kind != format.KindMerge || len(t.Keys) == 0 {
		return false, "", nil
	}
	frag := m.Fragment(f.ID)
	before, err := table.ReadManifest(ctx, b, v-1)
	if errors.Is(err, format.ErrVersionNotFound) {
		return false, fmt.Sprintf("written by v%d, a merge of upserts; the version before it was already collected", v), nil
	}
	if err != nil {
		return false, "", err
	}
	prev := before.Fragment(f.ID)
	if prev == nil || frag == nil {
		return false, fmt.Sprintf("written by v%d, a merge of upserts; the fragment is not in the version before it", v), nil
	}
	rows, err := format.ReadDeletions(ctx, b, prev)
	if errors.Is(err, blob.ErrNotFound) {
		return false, fmt.Sprintf("written by v%d, a merge of upserts; the vector it replaced is gone too", v), nil
	}
	if err != nil {
		return false, "", err
	}
	schema := before.Schema()
	if names, ok := table.CurrentNames(schema, t.Keys); ok {
		ks, err := table.KeysWritten(ctx, b, schema, names, t.Added)
		if err != nil {
			return false, "", err
		}
		own := *frag
		own.Deletion = nil
		found, err := table.SnapshotOf(b, schema, []format.Fragment{own}).KeyRows(ctx, ks, 1, nil)
		if err != nil {
			return false, "", err
		}
		rows = format.UnionSorted(rows, found[f.ID])
	}
	if int64(len(rows)) != frag.Deletion.Count {
		return false, fmt.Sprintf("written by v%d, a merge of upserts; written again it deletes %d rows, the manifest says %d", v, len(rows), frag.Deletion.Count), nil
	}
	return repointVector(ctx, b, m, f, v, rows, opts)
}

// redoNamedVector writes again the deletion vector f.Key that merge v (t)
// gave fragment f.ID as it added it, gone: the rows of the named copies
// it dropped (Transaction.Named), whose names the table recorded before
// it (a merge stalled past garbage collection's safety age, its vector
// collected as an orphan, and it died before writing it again). The
// fragment points at the copy in a commit of kind delete.
func redoNamedVector(ctx context.Context, b blob.Bucket, m *format.Manifest, f format.Fragment, v uint64, t *format.Transaction, opts *commit.Options) (bool, string, error) {
	frag := m.Fragment(f.ID)
	var added *format.Fragment
	for i := range t.Added {
		if t.Added[i].ID == f.ID {
			added = &t.Added[i]
		}
	}
	if frag == nil || added == nil {
		return false, fmt.Sprintf("written by v%d, a merge; the fragment is not in the newest version", v), nil
	}
	rows := format.DroppedRows(t.Named)[added.Key]
	if int64(len(rows)) != frag.Deletion.Count {
		return false, fmt.Sprintf("written by v%d, a merge dropping copies of named appends; written again it deletes %d rows, the manifest says %d", v, len(rows), frag.Deletion.Count), nil
	}
	return repointVector(ctx, b, m, f, v, rows, opts)
}

// repointVector writes rows as a new deletion vector of fragment f.ID and
// points the fragment at it in a commit of kind delete on m; v is the
// merge that wrote the vector that is gone.
func repointVector(ctx context.Context, b blob.Bucket, m *format.Manifest, f format.Fragment, v uint64, rows []uint32, opts *commit.Options) (bool, string, error) {
	del := format.Deletion{Key: format.DeletionKey(f.ID, m.Version+1), Count: int64(len(rows))}
	if err := b.PutIfAbsent(ctx, del.Key, format.EncodeDeletions(rows)); err != nil {
		return false, "", err
	}
	o := commit.Options{}
	if opts != nil {
		o = *opts
	}
	o.CatchUp = true
	txn := format.Transaction{Kind: format.KindDelete, Writer: cmp.Or(o.Writer, "repair"),
		Deletions: []format.FragmentDeletion{{FragmentID: f.ID, Deletion: del}}}
	if _, err := commit.Commit(ctx, b, m, txn, &o); err != nil {
		return false, "", fmt.Errorf("compactor: pointing fragment %d at its vector written again (v%d's, a merge): %w", f.ID, v, err)
	}
	return true, "", nil
}

func unprovenKeys(descr []string) []string {
	out := make([]string, len(descr))
	for i, d := range descr {
		out[i], _, _ = strings.Cut(d, " ")
	}
	return out
}

// neverAcknowledged tells whether the commit that made version v, whose
// fragments mine are gone, provably was never acknowledged: it is not a
// merge or a create (whose rows were acknowledged before the commit), and
// an orphan record created before its manifest lists each of them.
func neverAcknowledged(ctx context.Context, b blob.Bucket, v uint64, t *format.Transaction, mine []format.Fragment, orphaned map[string]time.Time) (bool, string, error) {
	switch t.Kind {
	case format.KindMerge:
		return false, "merged rows were acknowledged in the shard's WAL", nil
	case format.KindCreate:
		return false, "a table's first rows were acknowledged by its creation", nil
	}
	attrs, err := b.Attributes(ctx, format.ManifestKey(v))
	if errors.Is(err, blob.ErrNotFound) {
		return false, "its manifest is gone", nil
	}
	if err != nil {
		return false, "", err
	}
	for _, f := range mine {
		when, ok := orphaned[f.Key]
		if !ok {
			return false, "garbage collection did not delete it", nil
		}
		if !when.Before(attrs.ModTime) {
			return false, "garbage collection deleted it after the commit landed", nil
		}
	}
	return true, "", nil
}

// findMissing returns the newest version and its fragments whose data
// object (or deletion vector) is gone.
func findMissing(ctx context.Context, b blob.Bucket, exists func(key string) bool) (*format.Manifest, []format.Fragment, error) {
	m, err := table.ReadLatest(ctx, b)
	if err != nil {
		return nil, nil, err
	}
	missing, err := missingIn(ctx, b, m, exists)
	return m, missing, err
}

// missingIn lists the fragments of m whose data object or deletion vector
// is gone (exists, when not nil, vouches for keys known to be there).
func missingIn(ctx context.Context, b blob.Bucket, m *format.Manifest, exists func(key string) bool) ([]format.Fragment, error) {
	gone := func(key string) (bool, error) {
		if exists != nil && exists(key) {
			return false, nil
		}
		_, err := b.Attributes(ctx, key)
		if errors.Is(err, blob.ErrNotFound) {
			return true, nil
		}
		return false, err
	}
	var missing []format.Fragment
	for _, f := range m.Fragments {
		lost, err := gone(f.Key)
		if err != nil {
			return nil, err
		}
		if !lost && f.Deletion != nil {
			if lost, err = gone(f.Deletion.Key); err != nil {
				return nil, err
			}
			if lost {
				f.Key = f.Deletion.Key // what is missing
			}
		}
		if lost {
			missing = append(missing, f)
		}
	}
	return missing, nil
}

// DropMissing is the operator's last resort when data the newest version
// references is gone for good: one Rewrite that removes the fragments
// whose data object or deletion vector is missing, so that the table reads
// again without their rows. It returns the fragments it dropped. Restoring
// the objects from a backup, when there is one, loses nothing instead.
func DropMissing(ctx context.Context, b blob.Bucket, opts *commit.Options) ([]format.Fragment, error) {
	o := commit.Options{}
	if opts != nil {
		o = *opts
	}
	o.CatchUp = true
	var missing []format.Fragment
	_, err := commit.Drive(ctx, b, nil, &o, 10, func(ctx context.Context, m *format.Manifest, _ error) (commit.Plan, error) {
		var err error
		if missing, err = missingIn(ctx, b, m, nil); err != nil || len(missing) == 0 {
			return commit.Plan{Done: true}, err
		}
		txn := format.Transaction{Kind: format.KindRewrite}
		for _, f := range missing {
			txn.Removed = append(txn.Removed, f.ID)
		}
		return commit.Plan{Txn: txn}, nil
	})
	if errors.Is(err, commit.ErrBudget) {
		return nil, fmt.Errorf("compactor: dropping missing fragments kept conflicting: %w", err)
	}
	if err != nil {
		return nil, err
	}
	return missing, nil
}
