package walshard

import (
	"context"
	"errors"
	"fmt"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/table"
	"github.com/stratadb/strata/table/fragment"
	"github.com/stratadb/strata/walshard/wal"
)

// CheckLog reads every WAL entry of shard between its flushed position and
// the end of its log, by name and in full, and changes nothing. It returns
// the positions that cannot be replayed, as *MissingEntryError and
// *CorruptEntryError values: while any is there the shard will not open,
// nor be adopted or read fresh (an entry whose rows the table cannot take
// is not among them: replay quarantines it). A shard open elsewhere may
// flush meanwhile; a gap its flush explains is read again, not reported.
func CheckLog(ctx context.Context, b blob.Bucket, shard string) ([]error, error) {
	if err := wal.CheckShardID(shard); err != nil {
		return nil, err
	}
	if e, err := wal.NewestEpoch(ctx, b, shard); err != nil || e == 0 {
		if err == nil {
			err = fmt.Errorf("%w %q", ErrUnknownShard, shard)
		}
		return nil, err
	}
	m, err := table.ReadLatest(ctx, b)
	if err != nil {
		return nil, err
	}
	s := &Shard{b: b, l: wal.NewLayout(shard), id: shard, schema: m.Schema()}
	var damage []error
	err = s.readUnflushed(ctx, nil, func(*wal.State) error {
		damage = nil
		return nil
	}, func(e *wal.Entry, err error) error {
		switch {
		case errors.Is(err, ErrMissingEntry), errors.Is(err, wal.ErrCorruptEntry):
			damage = append(damage, err)
		case errors.Is(err, wal.ErrPoisonEntry):
		case err != nil:
			return err
		default:
			fragment.ReleaseAll(e.Batches)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return damage, nil
}
