package fleetmerge

import (
	"context"
	"slices"
	"time"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/commit"
	"github.com/stratadb/strata/internal/plant"
	"github.com/stratadb/strata/table/format"
)

// Names across shards. A shard knows the names of its own appends alone:
// an append sent again to another shard (a retry that reached another
// server) is stored by both. The merge is where shards meet: a generation
// lists where its named rows are (Generation.Named), and a merge installs
// a name's rows only when the table does not record the name yet (a direct
// append's, or another shard's merged), deleting the others' copies in the
// same commit (format.NamedRows; commit.Apply checks the choice against the
// version it lands on, and a merge that finds it changed plans again).

// placed is where a flush object's rows went: copied into fragment key,
// from row offset on.
type placed struct {
	key    string
	offset int64
}

// markNamed lists in txn the named appends of the parts' generations as
// its added fragments hold them (moved: flush objects copied into another
// fragment), marks those the table (base) records already, or an earlier
// part of txn, as dropped, and writes the deletion vectors that drop them
// from the added fragments.
func markNamed(ctx context.Context, b blob.Bucket, base *format.Manifest, txn *format.Transaction, parts []ShardPart, moved map[string]placed) error {
	var named []format.NamedRows
	for _, p := range parts {
		for _, g := range p.Gens {
			for _, n := range g.Named {
				if pl, ok := moved[n.Fragment]; ok {
					n.Fragment, n.Offset = pl.key, n.Offset+pl.offset
				}
				if slices.ContainsFunc(txn.Added, func(f format.Fragment) bool { return f.Key == n.Fragment }) {
					named = append(named, n)
				}
			}
		}
	}
	txn.Named = nil
	if len(named) == 0 || plant.On(plant.MergeIgnoresNames) {
		return nil
	}
	txn.Named = base.Producers.DropNamed(named)
	drops := format.DroppedRows(txn.Named)
	for i := range txn.Added {
		rows := drops[txn.Added[i].Key]
		if len(rows) == 0 {
			continue
		}
		d := format.Deletion{Key: format.DeletionKey(0, base.Version+1), Count: int64(len(rows))}
		if err := b.PutIfAbsent(ctx, d.Key, format.EncodeDeletions(rows)); err != nil {
			return err
		}
		txn.Added[i].Deletion = &d
	}
	return nil
}

// keepNamedVectors makes sure the deletion vectors that a merge which
// landed (cres) gave its added fragments, to drop copies of names the
// table records (markNamed), are still there. A merge that stalled past
// garbage collection's safety age between writing them (after began) and
// landing may find them collected as orphans: the version would then
// reference objects that are gone. They are written again under fresh
// keys and the fragments pointed at them, as a delete's are
// (commit.Table.KeepDeletions); a merge that took less than the safety
// age costs nothing.
func keepNamedVectors(ctx context.Context, b blob.Bucket, cres commit.Result, co commit.Options, began time.Time) error {
	m := cres.Manifest
	if m == nil {
		return nil
	}
	drops := format.DroppedRows(m.Transaction.Named)
	var dels []format.FragmentDeletion
	bodies := map[string][]byte{}
	for _, f := range m.Transaction.Added {
		if f.Deletion == nil || len(drops[f.Key]) == 0 {
			continue
		}
		bodies[f.Deletion.Key] = format.EncodeDeletions(drops[f.Key])
		dels = append(dels, format.FragmentDeletion{FragmentID: f.ID, Deletion: *f.Deletion})
	}
	if len(dels) == 0 {
		return nil
	}
	t, err := commit.OpenTableAt(b, m, &co)
	if err != nil {
		return err
	}
	_, err = t.KeepDeletions(ctx, cres, dels, bodies, began)
	return err
}
