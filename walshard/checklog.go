package walshard

import (
	"context"
	"errors"
	"fmt"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/table"
)

// CheckLog reads every WAL entry of shard between its flushed position and
// the end of its log, by name and in full, and changes nothing. It returns
// the positions that cannot be replayed, as *MissingEntryError and
// *CorruptEntryError values: while any is there the shard will not open,
// nor be adopted or read fresh (an entry whose rows the table cannot take
// is not among them: replay quarantines it). A shard open elsewhere may
// flush meanwhile; a gap its flush explains is read again, not reported.
func CheckLog(ctx context.Context, b blob.Bucket, shard string) ([]error, error) {
	if err := CheckShardID(shard); err != nil {
		return nil, err
	}
	if e, err := NewestEpoch(ctx, b, shard); err != nil || e == 0 {
		if err == nil {
			err = fmt.Errorf("%w %q", ErrUnknownShard, shard)
		}
		return nil, err
	}
	m, err := table.ReadLatest(ctx, b)
	if err != nil {
		return nil, err
	}
	l := newLayout(shard)
	s := &Shard{b: b, l: l, id: shard, schema: m.Schema()}
	for range 3 {
		st, err := readState(ctx, b, l)
		if err != nil {
			return nil, err
		}
		end, err := s.walEnd(ctx)
		if err != nil {
			return nil, err
		}
		var damage []error
		moved := false
		for pos := st.WALFlushed + 1; pos <= end && !moved; pos++ {
			e, err := s.readEntry(ctx, pos, false)
			switch {
			case errors.Is(err, blob.ErrNotFound):
				_, serr := b.Attributes(ctx, l.stateKey(st.Seq+1))
				if serr == nil {
					moved = true // flushed and cleaned since the state was read
					break
				}
				if !errors.Is(serr, blob.ErrNotFound) {
					return nil, serr
				}
				damage = append(damage, &MissingEntryError{Shard: shard, Position: pos, Key: l.walKey(pos), End: end})
			case errors.Is(err, ErrCorruptEntry):
				damage = append(damage, err)
			case errors.Is(err, ErrPoisonEntry):
			case err != nil:
				return nil, err
			default:
				releaseAll(e.batches)
			}
		}
		if !moved {
			return damage, nil
		}
	}
	return nil, fmt.Errorf("shard %q: %w", shard, ErrFleetMoving)
}
