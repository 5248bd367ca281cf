package sim

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/stratadb/strata/table"
	"github.com/stratadb/strata/table/expr"
	"github.com/stratadb/strata/table/format"
	"github.com/stratadb/strata/table/value"
	"github.com/stratadb/strata/walshard"
)

// Upserters.
//
// Upserters write keyed rows: ids from keyBase on (a space apart from the
// appended rows', which deleters never touch), a few of them hot, each
// row with a value unique to the write. They upsert by id, and update the
// value of a range of keys. Every read already checks that no id appears
// twice (one row per key); at the end, each key's one row holds the value
// of its last acknowledged write (or of a write whose outcome its writer
// never learned).

const (
	keyBase  = int64(1) << 40
	keySpace = 16
	hotKeys  = 4
)

// keyWrite is one upsert or update of a key.
type keyWrite struct {
	val     int64
	upsert  bool // an upsert (creates the row); else an update
	acked   bool
	version uint64
	read    uint64 // an update: the version it read (rows inserted after it are not updated)
	// shard: a shard's upsert, acknowledged at WAL position pos; its
	// version is that of the merge that installed it (installedAt).
	shard string
	pos   uint64
}

func keyedBatch(ids []int64, val int64) arrow.RecordBatch {
	b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	defer b.Release()
	for _, id := range ids {
		b.Field(0).(*array.Int64Builder).Append(id)
		b.Field(1).(*array.Int64Builder).Append(val)
		b.Field(2).(*array.BinaryBuilder).Append(blobOf(id))
	}
	return b.NewRecordBatch()
}

// upsertOp upserts a few keys (most often hot ones) or, one time in
// three, updates the value of a range of keys.
func (w *world) upsertOp(a *actor) (string, string) {
	if err := w.openTable(a); err != nil {
		return "open", short(err)
	}
	w.mu.Lock()
	w.nextVal++
	val := w.nextVal
	w.mu.Unlock()
	if w.intn(3) == 0 {
		lo := keyBase + int64(w.intn(keySpace))
		hi := lo + 1 + int64(w.intn(4))
		pred, err := expr.ParseFilter(fmt.Sprintf("id >= %d AND id < %d", lo, hi))
		if err != nil {
			return "update", w.fail("harness", "%v", err).Error()
		}
		var keys []int64
		for k := lo; k < hi && k < keyBase+keySpace; k++ {
			keys = append(keys, k)
		}
		done := w.noteKeyWrites(keys, keyWrite{val: val})
		res, err := a.tbl.Update(w.ctx, pred, []expr.Assignment{{Column: "val", Value: value.Int(val)}})
		var read uint64
		if res.Manifest != nil {
			read = res.Manifest.Transaction.ReadVersion
		}
		done(err == nil && !res.Done, res.Version, read)
		return "update", fmt.Sprintf("keys %d..%d to %d: %d rows at v%d: %s", lo-keyBase, hi-1-keyBase, val, res.Updated, res.Version, short(err))
	}
	keys := upsertKeys(w.intn)
	b := keyedBatch(keys, val)
	done := w.noteKeyWrites(keys, keyWrite{val: val, upsert: true})
	res, err := a.tbl.Upsert(w.ctx, []string{"id"}, b)
	b.Release()
	done(err == nil, res.Version, 0)
	return "upsert", fmt.Sprintf("keys %v to %d, replacing %d at v%d: %s", offsets(keys), val, res.Replaced, res.Version, short(err))
}

// upsertKeys draws the keys of an upsert, most often hot ones.
func upsertKeys(intn func(int) int) []int64 {
	set := map[int64]bool{}
	for range 1 + intn(4) {
		if intn(2) == 0 {
			set[keyBase+int64(intn(hotKeys))] = true
		} else {
			set[keyBase+int64(intn(keySpace))] = true
		}
	}
	return slices.Sorted(maps.Keys(set))
}

// shardUpsert upserts a few keys through a's shard (drawn from the side
// stream, see world.side).
func (w *world) shardUpsert(a *actor, s *walshard.Shard) string {
	w.mu.Lock()
	w.nextVal++
	val := w.nextVal
	w.mu.Unlock()
	keys := upsertKeys(w.sideIntn)
	b := keyedBatch(keys, val)
	done := w.noteKeyWrites(keys, keyWrite{val: val, upsert: true, shard: a.name})
	ack, err := s.UpsertOnce(w.ctx, nil, []string{"id"}, false, b)
	b.Release()
	done(err == nil, 0, 0)
	w.mu.Lock()
	for _, k := range keys {
		ws := w.keyWrites[k]
		for i := range ws {
			if ws[i].val == val {
				ws[i].pos = ack.Position
			}
		}
	}
	w.mu.Unlock()
	if (errors.Is(err, walshard.ErrFenced) && a.next == nil) || errors.Is(err, walshard.ErrSchemaChanged) {
		a.restart = true
	}
	return fmt.Sprintf("keys %v to %d at WAL position %d: %s", offsets(keys), val, ack.Position, short(err))
}

func (w *world) sideIntn(n int) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.side.IntN(n)
}

// noteInstalled records the values a merge of a shard's upserts (m)
// installed, by the version it made.
func (w *world) noteInstalled(m *format.Manifest) {
	frags := slices.Clone(m.Transaction.Added)
	for i := range frags {
		frags[i].ID = uint64(i)
	}
	vals, err := keyValues(w.ctx, table.SnapshotOf(w.store, schema, frags))
	if err != nil {
		w.fail("manifests", "v%d, a merge of upserts, does not read: %v", m.Version, err)
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for id, v := range vals {
		if _, ok := w.installedAt[[2]int64{id, v}]; !ok {
			w.installedAt[[2]int64{id, v}] = m.Version
		}
	}
}

func offsets(keys []int64) []int64 {
	out := make([]int64, len(keys))
	for i, k := range keys {
		out[i] = k - keyBase
	}
	return out
}

// noteKeyWrites records a write of keys before it is made (a read nested
// in it may see its rows); done records its outcome.
func (w *world) noteKeyWrites(keys []int64, kw keyWrite) (done func(acked bool, version, read uint64)) {
	w.mu.Lock()
	defer w.mu.Unlock()
	at := make([]int, len(keys))
	for i, k := range keys {
		at[i] = len(w.keyWrites[k])
		w.keyWrites[k] = append(w.keyWrites[k], kw)
	}
	return func(acked bool, version, read uint64) {
		w.mu.Lock()
		defer w.mu.Unlock()
		for i, k := range keys {
			kw := &w.keyWrites[k][at[i]]
			kw.acked, kw.version, kw.read = acked, version, read
		}
	}
}

// isKey tells whether id is an upserter's key.
func isKey(id int64) bool { return id >= keyBase && id < keyBase+keySpace }

// checkKeys checks the final table's keyed rows (seen by id, with their
// values): one row for each key an acknowledged upsert wrote, at most one
// for the others, and the row's value that of the key's last acknowledged
// write — the newest acknowledged upsert, or the newest acknowledged
// update after it that read a version holding its row — or of a write
// whose outcome its writer never learned, or of an acknowledged update
// that read an older version (and, for a key no acknowledged upsert
// wrote, of any acknowledged update).
func (w *world) checkKeys(seen map[int64]int, vals map[int64]int64) error {
	w.mu.Lock()
	all := make(map[int64][]keyWrite, len(w.keyWrites))
	for k, ws := range w.keyWrites {
		all[k] = slices.Clone(ws)
		for i := range all[k] {
			if kw := &all[k][i]; kw.shard != "" {
				// A shard's upsert takes effect when a merge installs it.
				kw.version = w.installedAt[[2]int64{k, kw.val}]
			}
		}
	}
	w.mu.Unlock()
	for k := keyBase; k < keyBase+keySpace; k++ {
		writes := all[k]
		if err := w.checkShardUpserts(k, writes); err != nil {
			return err
		}
		var last *keyWrite
		for i := range writes {
			kw := &writes[i]
			if kw.acked && kw.upsert && (last == nil || kw.version > last.version) {
				last = kw
			}
		}
		switch {
		case seen[k] > 1:
			return w.fail("one row per key", "key %d has %d rows", k-keyBase, seen[k])
		case last != nil && seen[k] == 0:
			return w.fail("one row per key", "key %d, upserted at v%d, has no row", k-keyBase, last.version)
		case seen[k] == 0:
			continue
		}
		want := map[int64]bool{}
		for _, kw := range writes {
			switch {
			case !kw.acked:
				want[kw.val] = true
			case last == nil && !kw.upsert:
				// The row came from an upsert whose outcome was not
				// learned: an acknowledged update may have set it.
				want[kw.val] = true
			}
		}
		if last != nil {
			// An update after it applies if it read a version that
			// holds the upsert's row; one that read an older version
			// updated the rows it saw, which may not include this key's
			// (a new key is an insert, as an append's rows are).
			newest := *last
			for _, kw := range writes {
				switch {
				case !kw.acked || kw.upsert || kw.version <= last.version:
				case kw.read >= last.version && kw.version > newest.version:
					newest = kw
				case kw.read < last.version:
					want[kw.val] = true
				}
			}
			want[newest.val] = true
		}
		if !want[vals[k]] {
			return w.fail("the last acknowledged write wins", "key %d holds %d; its last acknowledged write (or one whose outcome was not learned) wrote one of %v", k-keyBase, vals[k], slices.Sorted(maps.Keys(want)))
		}
	}
	return nil
}

// checkShardUpserts checks that every acknowledged upsert of key k
// through a shard was installed by a merge, or replaced, before it was, by
// a later upsert of k through the same shard that was (flushed together,
// the later one of a key replaces the earlier one).
func (w *world) checkShardUpserts(k int64, writes []keyWrite) error {
	for i, kw := range writes {
		if kw.shard == "" || !kw.acked || kw.version > 0 {
			continue
		}
		replaced := slices.ContainsFunc(writes[i+1:], func(later keyWrite) bool {
			return later.shard == kw.shard && later.upsert && later.version > 0
		})
		if !replaced {
			return w.fail("no lost rows", "key %d: %s's upsert to %d, acknowledged at WAL position %d, was never merged", k-keyBase, kw.shard, kw.val, kw.pos)
		}
	}
	return nil
}

// keyValues reads the value of each upserter key's row in s.
func keyValues(ctx context.Context, s *table.Snapshot) (map[int64]int64, error) {
	pred, err := expr.ParseFilter(fmt.Sprintf("id >= %d AND id < %d", keyBase, keyBase+keySpace))
	if err != nil {
		return nil, err
	}
	vals := map[int64]int64{}
	for rec, err := range s.Scan(ctx, table.ScanOptions{Columns: []string{"id", "val"}, Filter: pred, Parallelism: 1}) {
		if err != nil {
			return nil, err
		}
		ids := rec.Column(0).(*array.Int64).Int64Values()
		for i, v := range rec.Column(1).(*array.Int64).Int64Values() {
			vals[ids[i]] = v
		}
	}
	return vals, nil
}
