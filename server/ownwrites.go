package server

import (
	"context"
	"iter"
	"net/http"
	"strconv"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/stratadb/strata/engine"
	"github.com/stratadb/strata/table"
)

// Reads that see the client's own writes.
//
// An append through a shard is acknowledged before it is merged into the
// table: a plain read of the latest version does not see it until the
// next merge. A client that names the writes it had acknowledged
// (written=SHARD:POSITION,… — each shard's newest WAL position, from the
// appends' answers) gets a read that holds them, at the least cost that
// does:
//
//   - every named position merged already (the latest version's record of
//     the shard covers it): the plain read, no request more;
//   - the positions not merged all this server's own shard's: the latest
//     version with what that shard holds unmerged (its memtable and
//     flushed generations; its ScanFresh);
//   - else (another replica's shard, or this server restarted since): a
//     fresh read of every shard of the fleet (engine.DB.ScanFresh).

// maxWritten bounds the shards a written= names.
const maxWritten = 1024

// writtenQuery parses written=SHARD:POSITION,…; nil when absent.
func writtenQuery(r *http.Request) (map[string]uint64, error) {
	v := r.URL.Query().Get("written")
	if v == "" {
		return nil, nil
	}
	parts := strings.Split(v, ",")
	if len(parts) > maxWritten {
		return nil, badRequest("written= names %d shards; at most %d", len(parts), maxWritten)
	}
	out := make(map[string]uint64, len(parts))
	for _, p := range parts {
		shard, pos, ok := strings.Cut(p, ":")
		n, err := strconv.ParseUint(pos, 10, 64)
		if !ok || err != nil || engine.CheckShardID(shard) != nil {
			return nil, badRequest("written=%q: want SHARD:POSITION[,SHARD:POSITION…] (a shard id and a WAL position from an append's answer)", p)
		}
		out[shard] = max(out[shard], n)
	}
	return out, nil
}

// ownWrites is how a read of the latest version, snap, sees the writes
// written names: nil when snap holds them all; else the rows to read
// instead of snap's.
func (s *Server) ownWrites(ctx context.Context, t *tableState, snap *table.Snapshot, written map[string]uint64, opts table.ScanOptions) iter.Seq2[arrow.RecordBatch, error] {
	marks := snap.Manifest().Shards
	own := t.db.OpenShard()
	ownOnly, covered := true, true
	for shard, pos := range written {
		if marks[shard].WAL >= pos {
			continue
		}
		covered = false
		if own == nil || own.ID() != shard {
			ownOnly = false
		}
	}
	switch {
	case covered:
		s.metrics.ownWrites.WithLabelValues("merged").Inc()
		return nil
	case ownOnly:
		s.metrics.ownWrites.WithLabelValues("own_shard").Inc()
		return own.ScanFresh(ctx, opts)
	default:
		s.metrics.ownWrites.WithLabelValues("fleet").Inc()
		return t.db.ScanFresh(ctx, opts)
	}
}
