package evolve

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/stratadb/strata/blob"
)

// Schema leases.
//
// A writer that acknowledges rows before they are committed (a WAL shard)
// holds the schema it opened with. A schema change that takes values away
// (a dropped column, a restore to a version without a column) must not
// find rows acknowledged under the old schema after it answered, or their
// values would be lost unseen. So:
//
//   - a commit that raises the table's schema id creates the marker
//     SchemaMarkKey(id) first (put-if-absent; empty), so that a writer can
//     tell with one request whether its schema is still the newest;
//   - a writer acknowledges rows only under a schema it checked within
//     SchemaLease (by the marker of the next id) before the write that
//     holds them began;
//   - a change that takes values away answers only SchemaLease plus
//     SchemaLeaseSlack after its commit, and only when the table has
//     shards: every write that began after the answer was checked after
//     the commit and refused the columns it lost.
//
// A marker without a commit (the change lost a race, or its process died)
// makes writers read the latest manifest at each check until the id is
// committed; it is never wrong, only dearer.
const (
	// SchemaDir holds the schema markers.
	SchemaDir = "_schema/"
	// SchemaLease is how old a writer's check of its schema may be when
	// it begins a write it will acknowledge.
	SchemaLease = 10 * time.Second
	// SchemaLeaseSlack is what a change that takes values away waits
	// beyond SchemaLease, for clocks that run at slightly different rates.
	SchemaLeaseSlack = 2 * time.Second
)

// SchemaMarkKey names the marker of schema id id.
func SchemaMarkKey(id uint64) string { return fmt.Sprintf("%s%020d", SchemaDir, id) }

// MarkSchema creates the marker of schema id id, if it is not there.
func MarkSchema(ctx context.Context, b blob.Bucket, id uint64) error {
	err := b.PutIfAbsent(ctx, SchemaMarkKey(id), nil)
	if err != nil && !errors.Is(err, blob.ErrExists) {
		return fmt.Errorf("table: marking schema %d: %w", id, err)
	}
	return nil
}

// SchemaMarked tells whether the marker of schema id id is there: whether
// a commit may have raised the table's schema to id.
func SchemaMarked(ctx context.Context, b blob.Bucket, id uint64) (bool, error) {
	_, err := b.Attributes(ctx, SchemaMarkKey(id))
	if errors.Is(err, blob.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("table: reading the marker of schema %d: %w", id, err)
	}
	return true, nil
}

// LosesColumns tells whether going from schema before to after takes
// values away: a column of before whose stored name after has no column
// under (dropped, or left out by a restore). A rename keeps the stored
// name, and takes nothing away.
func LosesColumns(before, after *arrow.Schema) bool {
	live := map[string]bool{}
	for _, f := range after.Fields() {
		live[StoredName(f)] = true
	}
	for _, f := range before.Fields() {
		if !live[StoredName(f)] {
			return true
		}
	}
	return false
}
