package commit

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/stratadb/strata/table"
	"github.com/stratadb/strata/table/evolve"
	"github.com/stratadb/strata/table/format"
)

// Restore commits a new version whose rows and schema are version v's:
// an overwrite whose fragments are v's own objects (with their deletion
// vectors), so nothing is copied. In the conflict matrix it is an
// Overwrite: a commit that lands before it is replaced by it (its rows go,
// as every row not in v does); an append, merge, delete or compaction
// planned before it and landing after fails with a conflict and is planned
// again on the restored table (a shard's merge then adds its generations on
// top of it). Rows acknowledged through shards and not yet merged are not
// touched: they are merged on top of the restored version. A restore that
// takes a column away answers only once no shard can acknowledge rows
// under the schema before (see Alter).
//
// While it works, v is held by a tag of its own (restore-<id>), so that
// garbage collection cannot take v's objects between the read and the
// commit (the tag's check against the GC boundary, CreateTag, is what
// makes that sure); the tag is deleted once the restore landed or failed.
// A restore that dies in between leaves the tag: deleting it lets v go as
// the retention says. A version at or below the GC boundary is
// format.ErrVersionNotFound.
func (t *Table) Restore(ctx context.Context, v uint64) (Result, error) {
	hold := "restore-" + strings.ToLower(format.NewID())
	if err := table.CreateTag(ctx, t.b, hold, v); err != nil {
		return Result{}, fmt.Errorf("commit: restore of v%d: %w", v, err)
	}
	res, err := t.restore(ctx, v)
	if derr := table.DeleteTag(context.WithoutCancel(ctx), t.b, hold); derr != nil && !errors.Is(derr, format.ErrTagNotFound) {
		err = errors.Join(err, fmt.Errorf("commit: restore of v%d: deleting the tag %s that held it: %w", v, hold, derr))
	}
	return res, err
}

func (t *Table) restore(ctx context.Context, v uint64) (Result, error) {
	m, err := table.ReadManifest(ctx, t.b, v)
	if err != nil {
		return Result{}, fmt.Errorf("commit: restore of v%d: %w", v, err)
	}
	if _, err := t.Refresh(ctx); err != nil {
		return Result{}, err
	}
	schemaIPC := m.SchemaIPC
	if sc := evolve.RestoredSchema(m.Schema(), t.base().Schema()); sc != m.Schema() {
		if schemaIPC, err = evolve.EncodeSchema(sc); err != nil {
			return Result{}, err
		}
	}
	txn := format.Transaction{Kind: format.KindOverwrite, CommitID: format.NewID(), SchemaIPC: schemaIPC,
		Added: slices.Clone(m.Fragments), Restores: v}
	before := t.base().Schema()
	res, err := t.Commit(ctx, txn)
	if err != nil {
		return res, err
	}
	return res, t.outwaitLeases(ctx, res.Version, before, res.Manifest.Schema())
}
