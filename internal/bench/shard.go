package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/walshard"
)

// shardWriter appends through the writer's own shard: each append is
// acknowledged once durable in the shard's WAL; merges run in the
// background; the final flush and merge (finish) is inside the timed phase.
type shardWriter struct {
	s     *walshard.Shard
	names *names
}

func openShardWriter(ctx context.Context, b blob.Bucket, w int, reuse int64, n *names) (ingestWriter, error) {
	s, err := walshard.Open(ctx, b, &walshard.Options{Shard: fmt.Sprintf("w%02d", w),
		FlushBytes: 16 << 20, MergeInterval: 200 * time.Millisecond, ReuseBytes: reuse})
	if err != nil {
		return nil, err
	}
	return shardWriter{s, n}, nil
}

func (w shardWriter) append(ctx context.Context, rec arrow.RecordBatch) (int, error) {
	if w.names != nil {
		_, err := w.s.AppendOnce(ctx, w.names.next(), rec)
		return 0, err
	}
	return 0, w.s.Append(ctx, rec)
}
func (w shardWriter) finish(ctx context.Context) error { return w.s.Drain(ctx) }
func (w shardWriter) close()                           { w.s.Close() }

func addStats(a, b blob.Stats) blob.Stats {
	return blob.Stats{Gets: a.Gets + b.Gets, RangeGets: a.RangeGets + b.RangeGets, Puts: a.Puts + b.Puts,
		CondPutsWon: a.CondPutsWon + b.CondPutsWon, CondPutsLost: a.CondPutsLost + b.CondPutsLost,
		CondPutsErr: a.CondPutsErr + b.CondPutsErr, Lists: a.Lists + b.Lists, Deletes: a.Deletes + b.Deletes,
		Heads: a.Heads + b.Heads, BytesIn: a.BytesIn + b.BytesIn, BytesOut: a.BytesOut + b.BytesOut}
}
