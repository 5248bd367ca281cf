package commit

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/stratadb/strata/table/evolve"
	"github.com/stratadb/strata/table/expr"
	"github.com/stratadb/strata/table/format"
)

// Apply returns the manifest that committing txn on top of cur makes:
// version cur.Version+1, with txn recorded (its added fragments with the
// ids they were given, and a fingerprint of the new state). It fails with
// a retryable *ConflictError when txn refers to fragments cur lacks.
func Apply(cur *format.Manifest, txn *format.Transaction) (*format.Manifest, error) {
	if err := cur.CheckWritable(); err != nil {
		return nil, err
	}
	rec := *txn
	rec.Added = slices.Clone(txn.Added)
	if k := rec.Idempotency; k != nil {
		o, found, err := cur.Producers.Lookup(*k)
		if err != nil {
			return nil, err
		}
		if found {
			return nil, &duplicateError{outcome: o}
		}
	}
	if len(rec.Merges) > 0 && rec.Whole {
		if err := wholeFits(cur, &rec); err != nil {
			return nil, err
		}
	} else if len(rec.Merges) > 0 {
		if trimFleetMerge(cur, &rec); len(rec.Merges) == 0 {
			return nil, errNothingLeft
		}
	}
	for i := range rec.Added {
		rec.Added[i].ID = cur.NextFragmentID + uint64(i)
	}
	rec.Remap = slices.Clone(txn.Remap)
	for i := range rec.Remap {
		pos := rec.Remap[i].To
		if pos >= uint64(len(rec.Added)) {
			return nil, fmt.Errorf("commit: remap entry %d names output %d of %d", i, pos, len(rec.Added))
		}
		rec.Remap[i].To = rec.Added[pos].ID
	}
	next, err := apply(cur, &rec)
	if err != nil {
		return nil, err
	}
	rec.Committed = next.Timestamp
	next.NextFragmentID = cur.NextFragmentID + uint64(len(rec.Added))
	rec.Version, rec.NextFragmentID, rec.FragmentCount = next.Version, next.NextFragmentID, len(next.Fragments)
	next.Transaction = rec
	return next, nil
}

// Replay rebuilds version cur.Version+1 from cur and the transaction that
// made it, as read with table.ReadTransaction, without reading that
// version's whole manifest. It checks the result against the fingerprint
// the transaction recorded; on any mismatch it returns an error and the
// caller reads the manifest instead.
func Replay(cur *format.Manifest, rec *format.Transaction) (*format.Manifest, error) {
	if rec.Version != cur.Version+1 {
		return nil, fmt.Errorf("commit: replay of v%d on v%d", rec.Version, cur.Version)
	}
	if _, minor := rec.Format(); minor > format.FormatMinor {
		// A newer build's version may hold what a replay here drops: the
		// caller reads its manifest, which says its format.
		return nil, fmt.Errorf("commit: replay of v%d, written in format minor %d, newer than this build's", rec.Version, minor)
	}
	next, err := apply(cur, rec)
	if err != nil {
		return nil, err
	}
	if !rec.Committed.IsZero() {
		next.Timestamp = rec.Committed // the version's own, not this process's clock
	}
	next.NextFragmentID = rec.NextFragmentID
	for _, f := range rec.Added {
		if f.ID >= next.NextFragmentID || f.ID < cur.NextFragmentID {
			return nil, fmt.Errorf("commit: replay of v%d: fragment id %d outside [%d, %d)", rec.Version, f.ID, cur.NextFragmentID, next.NextFragmentID)
		}
	}
	if len(next.Fragments) != rec.FragmentCount {
		return nil, fmt.Errorf("commit: replay of v%d gives %d fragments, the commit recorded %d", rec.Version, len(next.Fragments), rec.FragmentCount)
	}
	next.Transaction = *rec
	return next, nil
}

// applyOverwrite makes next hold txn's fragments alone, under its schema.
func applyOverwrite(cur, next *format.Manifest, txn *format.Transaction) error {
	txn.Removed = nil
	for _, f := range next.Fragments {
		txn.Removed = append(txn.Removed, f.ID)
	}
	next.Fragments = slices.Clone(txn.Added)
	next.SchemaIPC = txn.SchemaIPC
	if err := format.Refresh(next); err != nil {
		return err
	}
	next.Indexes = indexesKept(cur.Schema(), next.Schema(), cur.Indexes)
	if k := txn.Idempotency; k != nil {
		// A named overwrite sent again finds its name, and does not drop
		// what was written after it.
		next.Producers = cur.Producers.Record(*k, next.Version, addedRows(txn))
	}
	return nil
}

// indexesKept are the indexes of a table whose schema old became now
// (an overwrite's, a restore's): each whose column now has, by stored
// name, renamed or not, of the same type. An index of a column gone, or
// of another type now (a restore to a version before a drop and an add
// of the name), is dropped: its object holds keys of the other type.
func indexesKept(old, now *arrow.Schema, indexes []format.Index) []format.Index {
	byStored := map[string]arrow.Field{}
	for _, f := range now.Fields() {
		byStored[evolve.StoredName(f)] = f
	}
	var kept []format.Index
	for _, ix := range indexes {
		idx := old.FieldIndices(ix.Column)
		if len(idx) != 1 {
			continue
		}
		was := old.Field(idx[0])
		if f, ok := byStored[evolve.StoredName(was)]; ok && arrow.TypeEqual(f.Type, was.Type) {
			ix.Column = f.Name
			kept = append(kept, ix)
		}
	}
	return kept
}

// merged is a shard's record after a merge of it: its watermark and
// epoch; the newest state and WAL position of it merged.
func merged(mark format.ShardMark, sm format.ShardMerge) format.ShardMark {
	return format.ShardMark{Watermark: sm.Watermark, Epoch: sm.Epoch, Seq: max(mark.Seq, sm.Seq), WAL: max(mark.WAL, sm.WAL)}
}

// apply makes the next state from cur and a transaction whose added
// fragments already carry their ids.
func apply(cur *format.Manifest, txn *format.Transaction) (*format.Manifest, error) {
	if err := keepsColumns(cur, txn); err != nil {
		return nil, err
	}
	next := cur.Clone()
	next.Version = cur.Version + 1
	next.Parent = cur.Version
	// A version's commit time never goes back, whatever the writers'
	// clocks say: time travel by timestamp searches the versions by it.
	next.Timestamp = time.Now().UTC()
	if next.Timestamp.Before(cur.Timestamp) {
		next.Timestamp = cur.Timestamp
	}
	gone := func(id uint64) error {
		return &ConflictError{Ours: *txn, Version: cur.Version, Retryable: true,
			Reason: fmt.Sprintf("fragment %d is no longer in version %d", id, cur.Version)}
	}
	switch txn.Kind {
	case format.KindAppend:
		next.Fragments = append(next.Fragments, txn.Added...)
		if k := txn.Idempotency; k != nil {
			next.Producers = cur.Producers.Record(*k, next.Version, addedRows(txn))
		}
	case format.KindMerge:
		if len(txn.Merges) > 0 {
			return next, applyFleetMerge(cur, next, txn)
		}
		if mark, ok := cur.Shards[txn.Shard]; ok && mark.Epoch > txn.Epoch {
			return nil, &ConflictError{Ours: *txn, Version: cur.Version,
				Reason: fmt.Sprintf("shard %q is owned by epoch %d; this merge is from epoch %d (fenced)", txn.Shard, mark.Epoch, txn.Epoch)}
		}
		// A merge of a shard's upserts replaces the rows with their keys.
		if err := applyDeletions(next, txn.Deletions, gone); err != nil {
			return nil, err
		}
		next.Fragments = append(next.Fragments, txn.Added...)
		if next.Shards == nil {
			next.Shards = map[string]format.ShardMark{}
		}
		next.Shards[txn.Shard] = merged(cur.Shards[txn.Shard], format.ShardMerge{Watermark: txn.Watermark, Epoch: txn.Epoch, Seq: txn.Seq, WAL: txn.WAL})
		if err := recordNamed(cur, next, txn); err != nil {
			return nil, err
		}
	case format.KindDelete:
		if err := applyDeletions(next, txn.Deletions, gone); err != nil {
			return nil, err
		}
	case format.KindUpsert, format.KindUpdate:
		if err := applyDeletions(next, txn.Deletions, gone); err != nil {
			return nil, err
		}
		next.Fragments = append(next.Fragments, txn.Added...)
		if k := txn.Idempotency; k != nil {
			// A named upsert sent again finds its name, and replaces
			// nothing a later upsert wrote.
			next.Producers = cur.Producers.Record(*k, next.Version, addedRows(txn))
		}
	case format.KindRewrite:
		for _, id := range txn.Removed {
			if next.Fragment(id) == nil {
				return nil, gone(id)
			}
		}
		next.Fragments = slices.DeleteFunc(next.Fragments, func(f format.Fragment) bool { return slices.Contains(txn.Removed, f.ID) })
		next.Fragments = append(next.Fragments, txn.Added...)
		next.Remap = append(next.Remap, txn.Remap...)
		// Taking back an upsert gives its fragments their vectors back.
		if err := applyDeletions(next, txn.Deletions, gone); err != nil {
			return nil, err
		}
		if txn.Undoes != 0 {
			// The append taken back stored nothing: its name goes too.
			next.Producers = cur.Producers.Forget(txn.Undoes)
		}
	case format.KindOverwrite:
		if err := applyOverwrite(cur, next, txn); err != nil {
			return nil, err
		}
	case format.KindAlter:
		if err := applyAlter(cur, next, txn); err != nil {
			return nil, err
		}
	case format.KindCreateIndex:
		if err := applyCreateIndex(next, txn); err != nil {
			return nil, err
		}
	default:
		return nil, fmt.Errorf("commit: cannot apply a %q transaction to an existing table", txn.Kind)
	}
	return next, nil
}

// keepsColumns refuses (a conflict) an append or an upsert whose rows
// were written under a schema a later commit took a column of away (a
// drop, or a restore to a version without it) and that hold values in
// that column: applied, it would be acknowledged without them. The
// matrix finds such an alter among the versions a commit rebases over
// (Check); this finds it whatever the commit's base, as for rows written
// before a stall, or sent again on a newer version.
func keepsColumns(cur *format.Manifest, txn *format.Transaction) error {
	if txn.Kind != format.KindAppend && txn.Kind != format.KindUpsert {
		return nil
	}
	id := evolve.SchemaID(cur.Schema())
	var live map[string]bool
	for _, f := range txn.Added {
		if f.SchemaID >= id {
			continue
		}
		if live == nil {
			live = map[string]bool{}
			for _, c := range cur.Schema().Fields() {
				live[evolve.StoredName(c)] = true
			}
		}
		for _, c := range f.Columns {
			if c.Nulls < f.Rows && !live[c.Name] {
				return &ConflictError{Ours: *txn, Version: cur.Version, Reason: fmt.Sprintf(
					"its rows, written under schema %d, hold values in the column stored as %q, which schema %d of v%d no longer has", f.SchemaID, c.Name, id, cur.Version)}
			}
		}
	}
	return nil
}

// applyFleetMerge adds a fleet merge's generations to next and moves
// each shard's watermark.
func applyFleetMerge(cur, next *format.Manifest, txn *format.Transaction) error {
	next.Fragments = append(next.Fragments, txn.Added...)
	if next.Shards == nil {
		next.Shards = map[string]format.ShardMark{}
	}
	for _, sm := range txn.Merges {
		mark := cur.Shards[sm.Shard]
		if mark.Epoch > sm.Epoch || mark.Watermark >= sm.Watermark {
			return fmt.Errorf("commit: fleet merge of shard %q to %d (epoch %d) on a table at %d (epoch %d)",
				sm.Shard, sm.Watermark, sm.Epoch, mark.Watermark, mark.Epoch)
		}
		next.Shards[sm.Shard] = merged(mark, sm)
	}
	return recordNamed(cur, next, txn)
}

// recordNamed records in next the named appends a merge installs, and
// checks the ones it drops: a name installed meanwhile by another shard's
// merge or a direct append (or forgot by a take-back) makes the merge a
// retryable conflict, planned again on the newer version.
func recordNamed(cur, next *format.Manifest, txn *format.Transaction) error {
	if len(txn.Named) == 0 {
		return nil
	}
	p, err := cur.Producers.RecordNamed(txn.Named, next.Version, txn.Time)
	if err != nil {
		return &ConflictError{Ours: *txn, Version: cur.Version, Retryable: true, Reason: err.Error()}
	}
	next.Producers = p
	return nil
}

// applyDeletions gives fragments of next their new deletion vectors.
func applyDeletions(next *format.Manifest, dels []format.FragmentDeletion, gone func(uint64) error) error {
	for _, d := range dels {
		f := next.Fragment(d.FragmentID)
		if f == nil {
			return gone(d.FragmentID)
		}
		del := d.Deletion
		f.Deletion = &del
	}
	return nil
}

// duplicateError: the state records the transaction's idempotency key: an
// earlier commit of the same append stored its rows (outcome.At is its
// version), and this one must not.
type duplicateError struct{ outcome format.Outcome }

func (e *duplicateError) Error() string {
	return fmt.Sprintf("commit: the append was stored by v%d", e.outcome.At)
}

// addedRows counts the rows of the fragments a transaction adds.
func addedRows(txn *format.Transaction) int64 {
	var n int64
	for _, f := range txn.Added {
		n += f.Rows
	}
	return n
}

// errNothingLeft: a fleet merge whose every part other merges have
// already done; the commit is complete without a manifest.
var errNothingLeft = errors.New("commit: other merges did all this fleet merge would")

// wholeFits checks that a Whole merge applies to cur as planned: every
// part from the watermark the table records for its shard, which no newer
// owner merges. Its fragments hold copies of the parts' rows, several
// shards' in one, so it cannot be trimmed: otherwise it is a retryable
// conflict, and the merger plans again without what others took.
func wholeFits(cur *format.Manifest, rec *format.Transaction) error {
	for _, sm := range rec.MergedShards() {
		if mark := cur.Shards[sm.Shard]; mark.Watermark != sm.From || mark.Epoch > sm.Epoch {
			return &ConflictError{Ours: *rec, Version: cur.Version, Retryable: true,
				Reason: fmt.Sprintf("shard %q is at %d (epoch %d) in version %d; this merge copies its generations from %d (epoch %d)",
					sm.Shard, mark.Watermark, mark.Epoch, cur.Version, sm.From, sm.Epoch)}
		}
	}
	return nil
}

// trimFleetMerge fits a fleet merge to the version it is applied to: a
// shard that another merge took further, or that a newer owner now
// merges, keeps only its generations above the table's watermark (none,
// then its part goes); the rest stands. A generation is told by its key.
// So two merges of the same generations never both add them, whichever
// lands first, and a fleet merge never waits on an owner's.
func trimFleetMerge(cur *format.Manifest, rec *format.Transaction) {
	keep := map[string]format.ShardMerge{}
	for _, sm := range rec.Merges {
		if mark := cur.Shards[sm.Shard]; mark.Epoch <= sm.Epoch && sm.Watermark > mark.Watermark {
			keep[sm.Shard] = sm
		}
	}
	rec.Added = slices.DeleteFunc(rec.Added, func(f format.Fragment) bool {
		shard, gen, ok := format.ParseGenerationKey(f.Key)
		if !ok {
			return true
		}
		_, kept := keep[shard]
		return !kept || gen <= cur.Shards[shard].Watermark
	})
	rec.Merges = slices.DeleteFunc(slices.Clone(rec.Merges), func(sm format.ShardMerge) bool {
		_, kept := keep[sm.Shard]
		return !kept
	})
	rec.Named = slices.DeleteFunc(slices.Clone(rec.Named), func(n format.NamedRows) bool {
		return !slices.ContainsFunc(rec.Added, func(f format.Fragment) bool { return f.Key == n.Fragment })
	})
}

// applyCreateIndex gives next (a copy of the version before) the index
// txn built. A table with a cluster key takes none (ErrClusteredIndex).
func applyCreateIndex(next *format.Manifest, txn *format.Transaction) error {
	if txn.Index == nil {
		return fmt.Errorf("commit: create_index without an index")
	}
	if len(next.ClusterBy) > 0 {
		return fmt.Errorf("%w: %w", expr.ErrBadColumns, ErrClusteredIndex)
	}
	next.Indexes = slices.DeleteFunc(next.Indexes, func(ix format.Index) bool { return ix.Column == txn.Index.Column })
	next.Indexes = append(next.Indexes, *txn.Index)
	if len(next.Indexes) == 1 {
		// The only index was rebuilt from the current fragments: the
		// remap entries are folded in.
		next.Remap = nil
	}
	return nil
}
