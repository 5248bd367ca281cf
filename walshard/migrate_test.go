package walshard_test

import (
	"encoding/json"
	"testing"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/table"
	"github.com/stratadb/strata/table/format"
	"github.com/stratadb/strata/table/fragment"
	"github.com/stratadb/strata/walshard"
	"github.com/stratadb/strata/walshard/fleetmerge"
	"github.com/stratadb/strata/walshard/wal"
)

// olderBuildShard lays out shard as a build before flush objects left it:
// an epoch claim, a registration, a generation object of ids under gen/,
// announced under _fleet/pending/, and a JSON state (seq 2) that lists it.
func olderBuildShard(t *testing.T, b blob.Bucket, shard string, ids ...int64) {
	t.Helper()
	rec := batch(shard, ids...)
	defer rec.Release()
	key := format.GenerationKey(shard, 1, 1, "0ld")
	w, err := fragment.NewWriterAt(ctx, b, schema, key)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(rec); err != nil {
		t.Fatal(err)
	}
	f, err := w.Close()
	if err != nil {
		t.Fatal(err)
	}
	st := wal.State{Seq: 2, Epoch: 1, ID: "older-build", NextGen: 2,
		Generations: []wal.Generation{{Gen: 1, Key: key, Rows: f.Rows, Bytes: f.Bytes, Columns: f.Columns, Seq: 2}}}
	data, err := json.Marshal(&st)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range map[string][]byte{
		format.ShardEpochKey(shard, 1): []byte("older build"),
		format.FleetShardsDir + shard:  nil,
		format.ShardStateKey(shard, 1): []byte(`{"seq":1,"epoch":1,"id":"first","next_gen":1}`),
		format.ShardStateKey(shard, 2): data,
		format.PendingKey(shard, 1, 2): nil,
	} {
		if err := b.PutIfAbsent(ctx, k, v); err != nil {
			t.Fatal(err)
		}
	}
}

// A table an older build's shards wrote goes on: a fleet merge merges the
// generations they announced, as they are; a shard opened by this build
// moves to flush objects, its pending generation merged once, and leaves
// a stand-in among the old states that such a build reads as corrupt, so
// that it refuses the shard rather than miss what this build flushed.
func TestShardsOfAnOlderBuildAreMergedAndMoved(t *testing.T) {
	b := newTable(t, "file://"+t.TempDir())
	olderBuildShard(t, b, "old", 1, 2, 3)
	olderBuildShard(t, b, "moved", 10, 11)
	res, err := fleetmerge.Merge(ctx, b, nil)
	if err != nil || res.Generations != 2 {
		t.Fatalf("fleet merge of older shards: %+v %v", res, err)
	}
	exactlyOnce(t, baseIDs(t, b), []int64{1, 2, 3, 10, 11})
	if got := listKeys(t, b, format.FleetPendingDir); len(got) != 0 {
		t.Fatalf("announcements %q left after their merge", got)
	}

	// A third older shard's generation is pending when this build opens
	// it: the owner's merge takes it as it is, with the new rows copied.
	olderBuildShard(t, b, "opened", 20, 21)
	s := open(t, b, "opened", walshard.Options{})
	defer s.Close()
	appendIDs(t, s, 22)
	if _, err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Merge(ctx); err != nil {
		t.Fatal(err)
	}
	exactlyOnce(t, baseIDs(t, b), []int64{1, 2, 3, 10, 11, 20, 21, 22})
	if _, err := fleetmerge.Merge(ctx, b, nil); err != nil {
		t.Fatal(err)
	}
	exactlyOnce(t, baseIDs(t, b), []int64{1, 2, 3, 10, 11, 20, 21, 22})

	// Under state/, the stand-in alone: an older build reads its seq as 0
	// under a key that names 3, and calls the state corrupt.
	standInAlone(t, b, "opened", 3)
	// This build reads the shard from its flush objects, as does a new
	// owner, which finds nothing left to replay or merge.
	s.Close()
	again := open(t, b, "opened", walshard.Options{})
	defer again.Close()
	if st := again.Stats(); st.PendingGenerations != 0 || st.MemtableRows != 0 {
		t.Fatalf("reopened after the move: %+v", st)
	}
	exactlyOnce(t, countIDs(t, walshard.ScanFleet(ctx, b, table.ScanOptions{})), []int64{1, 2, 3, 10, 11, 20, 21, 22})
}

// A shard this build creates has a stand-in under state/ too, so that an
// older build opening it (a rollback) refuses it instead of taking it for
// a new or retired shard beside this build's flush objects.
func TestANewShardKeepsAnOlderBuildOff(t *testing.T) {
	b := newTable(t, "file://"+t.TempDir())
	s := open(t, b, "fresh", walshard.Options{})
	defer s.Close()
	standInAlone(t, b, "fresh", 1)
	if got := listKeys(t, b, format.FlushDir("fresh")); len(got) != 1 || got[0] != format.FlushKey("fresh", 1) {
		t.Fatalf("flush objects %q, want the open's state at 1", got)
	}
}

// standInAlone checks that shard's state/ holds a stand-in at seq alone:
// JSON whose seq is 0 and moved is seq, which an older build reads as a
// corrupt state.
func standInAlone(t *testing.T, b blob.Bucket, shard string, seq uint64) {
	t.Helper()
	states := listKeys(t, b, format.ShardStatesDir(shard))
	if len(states) != 1 || states[0] != format.ShardStateKey(shard, seq) {
		t.Fatalf("shard %s, under state/: %q, want the stand-in at %d alone", shard, states, seq)
	}
	data, err := b.Get(ctx, states[0])
	if err != nil {
		t.Fatal(err)
	}
	var stand struct {
		Seq   uint64 `json:"seq"`
		Moved uint64 `json:"moved"`
	}
	if err := json.Unmarshal(data, &stand); err != nil || stand.Seq != 0 || stand.Moved != seq {
		t.Fatalf("shard %s, stand-in %s: %+v %v", shard, data, stand, err)
	}
}
