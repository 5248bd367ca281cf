package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/engine"
	"github.com/stratadb/strata/table"
	"github.com/stratadb/strata/table/evolve"
	"github.com/stratadb/strata/table/expr"
	"github.com/stratadb/strata/table/value"
)

// clusterColumn is the column the clustered-filter phase clusters the
// table by and filters on. reward is drawn at random, so that before
// clustering no fragment's statistics rule any out; id, step and ts rise
// in each writer's appends, so that fragments' statistics prune them
// without a cluster key.
const clusterColumn = "reward"

// clusteredFilter reads every column of the rows a 1% filter on
// clusterColumn matches (reward < 0.01), before and after giving the
// table that cluster key and compacting it (which sorts every fragment
// by it): the time, requests and bytes of each read (wall_s, requests
// and bytes_read after; before_… before), against the table's bytes. It
// works on the table the phases before it built.
func clusteredFilter(ctx context.Context, cfg Config, u string) (Result, error) {
	b, err := cfg.open(ctx, u)
	if err != nil {
		return nil, err
	}
	defer b.Close()
	db, err := openEngine(ctx, b)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	r := Result{}
	filter := expr.Lt(clusterColumn, value.Float(0.01))
	read := func(prefix string) (int64, error) {
		s, err := table.Open(ctx, b, nil)
		if err != nil {
			return 0, err
		}
		before, _ := blob.StatsOf(b)
		t0 := time.Now()
		var n int64
		for rec, err := range s.Scan(ctx, table.ScanOptions{Filter: filter}) {
			if err != nil {
				return 0, err
			}
			n += rec.NumRows()
		}
		wall := time.Since(t0)
		after, _ := blob.StatsOf(b)
		got := after.Sub(before)
		r[prefix+"wall_s"], r[prefix+"requests"], r[prefix+"bytes_read"] = round(wall.Seconds()), got.Requests(), got.BytesIn
		r[prefix+"table_bytes"], r[prefix+"fragments"] = s.Manifest().Bytes(), len(s.Manifest().Fragments)
		return n, nil
	}
	rowsBefore, err := read("before_")
	if err != nil {
		return nil, err
	}
	if _, err := db.Alter(ctx, evolve.ColumnChange{Op: evolve.ClusterBy, Columns: []string{clusterColumn}}); err != nil {
		return nil, err
	}
	info, err := db.Compact(ctx, engine.CompactOptions{Policy: cfg.compactPolicy()})
	if err != nil {
		return nil, err
	}
	r["compact_s"] = round(info.Duration.Seconds())
	rows, err := read("")
	if err != nil {
		return nil, err
	}
	r["rows"], r["column"] = rows, clusterColumn
	if rows != rowsBefore {
		return r, fmt.Errorf("the filter matched %d rows after clustering, %d before", rows, rowsBefore)
	}
	if tb, ok := r["table_bytes"].(int64); ok && tb > 0 {
		r["read_fraction"] = round(float64(r["bytes_read"].(int64)) / float64(tb))
	}
	return r, nil
}
