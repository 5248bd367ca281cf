package wal

import (
	"context"
	"crypto/rand"
	"fmt"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/table/format"
)

// ShardsDir holds every shard of a table.
const ShardsDir = format.ShardsDir

// CheckShardID validates a shard id.
func CheckShardID(id string) error {
	if id == "" || len(id) > 128 || id == "." || id == ".." {
		return fmt.Errorf("%w %q: want 1 to 128 of [A-Za-z0-9._-]", ErrBadShardID, id)
	}
	for _, r := range id {
		if !(r == '-' || r == '_' || r == '.' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') {
			return fmt.Errorf("%w %q: want 1 to 128 of [A-Za-z0-9._-]", ErrBadShardID, id)
		}
	}
	return nil
}

// Layout names one shard's objects; the names themselves live in
// package table's layout.go, beside every other key of a table.
// layout names a shard's objects; table is the table's id (its first
// manifest's TableID), which every state written carries.
type Layout struct{ id, dir, Table string }

func NewLayout(id string) Layout { return Layout{id: id, dir: format.ShardDir(id)} }

func (l Layout) Epochs() string                  { return format.ShardEpochsDir(l.id) }
func (l Layout) EpochKey(e uint64) string        { return format.ShardEpochKey(l.id, e) }
func (l Layout) WAL() string                     { return format.WALDir(l.id) }
func (l Layout) WalKey(pos uint64) string        { return format.WALKey(l.id, pos) }
func (l Layout) States() string                  { return format.ShardStatesDir(l.id) }
func (l Layout) StateKey(seq uint64) string      { return format.ShardStateKey(l.id, seq) }
func (l Layout) Flushes() string                 { return format.FlushDir(l.id) }
func (l Layout) FlushKey(seq uint64) string      { return format.FlushKey(l.id, seq) }
func (l Layout) Quarantine() string              { return format.QuarantineDir(l.id) }
func (l Layout) QuarantineKey(pos uint64) string { return format.QuarantineKey(l.id, pos) }

// GenKey names a generation object: its number, the owner's epoch, and a
// fresh random part, so that no two flush attempts share a name (a flush
// whose state write failed is retried under a new name).
func (l Layout) GenKey(gen, epoch uint64) string {
	var rnd [6]byte
	_, _ = rand.Read(rnd[:])
	return format.GenerationKey(l.id, gen, epoch, fmt.Sprintf("%x", rnd))
}

// ParseLast returns the number a listed key under dir names.
func ParseLast(dir, key string) (uint64, bool) { return format.ParseShardKey(dir, key) }

// NewestEpoch reads the newest epoch claimed on shard id (0: none), with one
// LIST of one key.
func NewestEpoch(ctx context.Context, b blob.Bucket, id string) (uint64, error) {
	if err := CheckShardID(id); err != nil {
		return 0, err
	}
	l := NewLayout(id)
	page, err := b.ListPage(ctx, l.Epochs(), "", 1)
	if err != nil || len(page.Objects) == 0 {
		return 0, err
	}
	e, _ := ParseLast(l.Epochs(), page.Objects[0].Key)
	return e, nil
}
