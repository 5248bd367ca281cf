package bench

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/engine"
)

// shardWriter appends through the writer's own shard: each append is
// acknowledged once durable in the shard's WAL; merges run in the
// background; the final flush and merge (finish) is inside the timed phase.
type shardWriter struct {
	db    *engine.DB
	names *names
}

func openShardWriter(ctx context.Context, b blob.Bucket, w int, reuse int64, n *names) (ingestWriter, error) {
	db, err := engine.Open(ctx, b, &engine.Options{Writer: fmt.Sprintf("w%02d", w), Log: slog.New(slog.DiscardHandler),
		Shard:         engine.ShardOptions{Shard: fmt.Sprintf("w%02d", w), FlushBytes: 16 << 20, ReuseBytes: reuse},
		MergeInterval: 200 * time.Millisecond})
	if err == nil {
		_, err = db.Shard(ctx) // opened before the clock starts
	}
	if err != nil {
		return nil, err
	}
	return shardWriter{db, n}, nil
}

func (w shardWriter) append(ctx context.Context, rec arrow.RecordBatch) (int, error) {
	o := engine.AppendOptions{}
	if w.names != nil {
		k := w.names.next()
		o.Key = &k
	}
	_, err := w.db.Append(ctx, o, rec)
	return 0, err
}
func (w shardWriter) finish(ctx context.Context) error { return w.db.Drain(ctx) }
func (w shardWriter) close()                           { w.db.Close() }

func addStats(a, b blob.Stats) blob.Stats {
	return blob.Stats{Gets: a.Gets + b.Gets, RangeGets: a.RangeGets + b.RangeGets, Puts: a.Puts + b.Puts,
		CondPutsWon: a.CondPutsWon + b.CondPutsWon, CondPutsLost: a.CondPutsLost + b.CondPutsLost,
		CondPutsErr: a.CondPutsErr + b.CondPutsErr, Lists: a.Lists + b.Lists, Deletes: a.Deletes + b.Deletes,
		Heads: a.Heads + b.Heads, BytesIn: a.BytesIn + b.BytesIn, BytesOut: a.BytesOut + b.BytesOut}
}
