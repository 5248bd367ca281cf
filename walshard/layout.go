package walshard

import (
	"crypto/rand"
	"fmt"

	"github.com/stratadb/strata/table"
)

// ShardsDir holds every shard of a table.
const ShardsDir = table.ShardsDir

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

// layout names one shard's objects; the names themselves live in
// package table's layout.go, beside every other key of a table.
// layout names a shard's objects; table is the table's id (its first
// manifest's TableID), which every state written carries.
type layout struct{ id, dir, table string }

func newLayout(id string) layout { return layout{id: id, dir: table.ShardDir(id)} }

func (l layout) epochs() string                  { return table.ShardEpochsDir(l.id) }
func (l layout) epochKey(e uint64) string        { return table.ShardEpochKey(l.id, e) }
func (l layout) wal() string                     { return table.WALDir(l.id) }
func (l layout) walKey(pos uint64) string        { return table.WALKey(l.id, pos) }
func (l layout) states() string                  { return table.ShardStatesDir(l.id) }
func (l layout) stateKey(seq uint64) string      { return table.ShardStateKey(l.id, seq) }
func (l layout) flushes() string                 { return table.FlushDir(l.id) }
func (l layout) flushKey(seq uint64) string      { return table.FlushKey(l.id, seq) }
func (l layout) quarantine() string              { return table.QuarantineDir(l.id) }
func (l layout) quarantineKey(pos uint64) string { return table.QuarantineKey(l.id, pos) }

// genKey names a generation object: its number, the owner's epoch, and a
// fresh random part, so that no two flush attempts share a name (a flush
// whose state write failed is retried under a new name).
func (l layout) genKey(gen, epoch uint64) string {
	var rnd [6]byte
	_, _ = rand.Read(rnd[:])
	return table.GenerationKey(l.id, gen, epoch, fmt.Sprintf("%x", rnd))
}

// parseLast returns the number a listed key under dir names.
func parseLast(dir, key string) (uint64, bool) { return table.ParseShardKey(dir, key) }
