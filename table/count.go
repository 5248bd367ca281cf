package table

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"

	"github.com/apache/arrow-go/v18/arrow/array"
	"golang.org/x/sync/errgroup"

	"github.com/stratadb/strata/table/expr"
	"github.com/stratadb/strata/table/format"
)

// CountResult says how a count was answered.
type CountResult struct {
	Rows             int64
	FragmentsScanned int // fragments whose statistics could not decide
}

// Count returns the number of live rows matching pred (nil: all). It is
// answered from the manifest's statistics for every fragment they decide
// (none of its rows can match, or all do), and scans only the others,
// reading only the predicate's columns.
func (s *Snapshot) Count(ctx context.Context, pred expr.Predicate) (CountResult, error) {
	bound, err := expr.Bind(pred, s.m.Schema())
	if err != nil {
		return CountResult{}, err
	}
	var res CountResult
	var undecided []uint64
	for i := range s.m.Fragments {
		f := &s.m.Fragments[i]
		switch {
		case bound == nil || bound.AllMatch(statsIn(s.m.Schema(), f)):
			res.Rows += f.LiveRows()
		case !bound.MayMatch(statsIn(s.m.Schema(), f)):
		default:
			undecided = append(undecided, f.ID)
		}
	}
	if len(undecided) == 0 {
		return res, nil
	}
	res.FragmentsScanned = len(undecided)
	for rec, err := range s.Scan(ctx, ScanOptions{Columns: bound.Columns(), Filter: bound, Fragments: undecided}) {
		if err != nil {
			return CountResult{}, err
		}
		res.Rows += rec.NumRows()
	}
	return res, nil
}

// MatchingRows returns, per fragment, the offsets of live rows matching
// pred, merged with the rows already deleted: the deletion vectors a
// Delete by pred would write. Fragments with no match are left out.
func (s *Snapshot) MatchingRows(ctx context.Context, pred expr.Predicate) (map[uint64][]uint32, error) {
	bound, err := expr.Bind(pred, s.m.Schema())
	if err != nil {
		return nil, err
	}
	found := map[uint64][]uint32{}
	for rec, err := range s.Scan(ctx, ScanOptions{Columns: []string{}, Filter: bound, WithRowAddress: true}) {
		if err != nil {
			return nil, err
		}
		frags := rec.Column(0).(*array.Uint64)
		offs := rec.Column(1).(*array.Uint32)
		for i := 0; i < int(rec.NumRows()); i++ {
			found[frags.Value(i)] = append(found[frags.Value(i)], offs.Value(i))
		}
	}
	return s.NewDeletions(ctx, found, 1)
}

// NewDeletions turns rows to delete, by fragment id, into each fragment's
// whole new deletion vector: the rows deleted before and these, sorted.
// The vectors are read parallelism at once (0: 8); found is not changed.
func (s *Snapshot) NewDeletions(ctx context.Context, found map[uint64][]uint32, parallelism int) (map[uint64][]uint32, error) {
	out := make(map[uint64][]uint32, len(found))
	var mu sync.Mutex
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(cmp.Or(parallelism, 8))
	for _, id := range slices.Sorted(maps.Keys(found)) {
		rows := slices.Clone(found[id])
		f := s.m.Fragment(id)
		if f == nil {
			return nil, fmt.Errorf("table: fragment %d is not in version %d", id, s.m.Version)
		}
		g.Go(func() error {
			old, err := format.ReadDeletionsCached(gctx, s.b, f)
			if err != nil {
				return err
			}
			slices.Sort(rows)
			dv := format.UnionSorted(old, slices.Compact(rows))
			mu.Lock()
			out[id] = dv
			mu.Unlock()
			return nil
		})
	}
	return out, g.Wait()
}
