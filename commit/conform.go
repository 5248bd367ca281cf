package commit

import (
	"context"
	"errors"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/stratadb/strata/table/evolve"
	"github.com/stratadb/strata/table/format"
)

// conformLatest conforms batches to base's schema (conformAll); rows it
// refuses are tried once more against the latest version's schema when a
// schema change made elsewhere may be why (a column this handle does not
// know, one made nullable). It returns the base they fit, and the
// conformed batches, which the caller releases.
func (t *Table) conformLatest(ctx context.Context, base *format.Manifest, batches []arrow.RecordBatch) (*format.Manifest, []arrow.RecordBatch, error) {
	conformed, err := conformAll(base.Schema(), batches)
	if errors.Is(err, evolve.ErrBadInput) {
		if snap, rerr := t.Refresh(ctx); rerr == nil && evolve.SchemaID(snap.Manifest().Schema()) > evolve.SchemaID(base.Schema()) {
			base = snap.Manifest()
			conformed, err = conformAll(base.Schema(), batches)
		}
	}
	return base, conformed, err
}

// conformAll passes batches through evolve.Conform, counting rows across
// them; the caller releases the result.
func conformAll(schema *arrow.Schema, batches []arrow.RecordBatch) ([]arrow.RecordBatch, error) {
	out := make([]arrow.RecordBatch, 0, len(batches))
	var base int64
	for _, rec := range batches {
		c, err := evolve.Conform(schema, rec, evolve.ConformOptions{RowBase: base})
		if err != nil {
			releaseAll(out)
			return nil, err
		}
		base += rec.NumRows()
		out = append(out, c)
	}
	return out, nil
}
