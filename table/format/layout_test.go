package format_test

import (
	"testing"

	"github.com/stratadb/strata/table/format"
)

// A generation's key and a WAL entry's key both name a shard and a
// number (a WAL entry's is its position); other keys name none.
func TestParseGenerationKey(t *testing.T) {
	for _, c := range []struct {
		key   string
		shard string
		gen   uint64
		ok    bool
	}{
		{format.GenerationKey("w-1", 7, 3, "abc"), "w-1", 7, true},
		{format.WALKey("w.2", 12), "w.2", 12, true},
		{format.WALKey("w.2", 12) + "x", "", 0, false},
		{format.ShardStateKey("w1", 4), "", 0, false},
		{format.ShardEpochKey("w1", 4), "", 0, false},
		{format.QuarantineKey("w1", 4), "", 0, false},
		{"_shards/a/b/wal/" + format.Inverted(3), "", 0, false},
		{"data/x.parquet", "", 0, false},
	} {
		shard, gen, ok := format.ParseGenerationKey(c.key)
		if shard != c.shard || gen != c.gen || ok != c.ok {
			t.Errorf("ParseGenerationKey(%q) = %q, %d, %v; want %q, %d, %v", c.key, shard, gen, ok, c.shard, c.gen, c.ok)
		}
	}
}
