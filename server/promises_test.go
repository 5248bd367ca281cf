package server_test

// What package server promises (its doc comment), and the test that pins
// each:
//
//   - An append is answered 200 only once its rows are durable in the
//     shard's WAL: TestAnAnsweredAppendIsInTheWAL; a failure before that is
//     an error status, and a named append sent again is stored once:
//     TestAnAppendWhoseOutcomeIsUnknownIsStoredOnce,
//     TestNamedRequestsAreStoredOnce, TestANamedCreateSentAgainAnswersItsTable;
//     an acknowledged entry the store lost is data_missing until repaired:
//     TestALostWALEntryIsDataMissingUntilRepaired.
//   - The shard a server writes through is derived from its instance id,
//     so replicas never share one: TestReplicasWriteThroughShardsOfTheirOwn;
//     a server whose shard was taken over opens it again:
//     TestAServerWhoseShardWasTakenOverOpensItAgain.
//   - Shutdown stops accepting, flushes and merges every shard it owns:
//     TestShutdownFlushesAndMerges, TestShutdownStopsARunningCompaction.
//   - The routes (create, describe, drop, append, scan, take, versions,
//     tags, compaction, LSM flush, merge and stats) answer as the OpenAPI
//     document says: TestTableRoutes, TestOpenAPIMatchesTheServer,
//     TestEveryRouteAnswers404ForAMissingTable, TestAcceptedAnswersHaveNoBody,
//     TestTableVerbsAndConventions.
//   - A checkpoint ends under sustained writes and fails when merges or the
//     flush stall: TestCheckpointEndsUnderSustainedWrites,
//     TestCheckpointFailsWhenMergesStall, TestCheckpointFailsWhenTheFlushStalls
//     (its waiting rule, exactly, in package client).
//   - Bad input is refused with a typed answer, never stored:
//     TestPoisonedAndOversizedAppendsAreRefused,
//     TestValuesAreStoredAsSentOrRefused,
//     TestNestedColumnsAndSchemasTheEngineCannotStore,
//     TestQueryStringsARouteWouldMisreadAreRefused, TestBadNamesAuthAndLimits,
//     TestARequestFramedTwoWaysIsRefusedAndTheConnectionClosed,
//     TestAMalformedChunkedBodyIs400.
//   - A busy server answers 429: TestABusyServerAnswers429, TestBusyAnswers.
//   - Options are validated: TestServerAndClientOptionsAreValidated.

import (
	"log/slog"
	"net/http/httptest"
	"os"
	"slices"
	"testing"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/client"
	"github.com/stratadb/strata/harness/rollouts"
	"github.com/stratadb/strata/harness/testenv"
	"github.com/stratadb/strata/server"
	"github.com/stratadb/strata/table"
	"github.com/stratadb/strata/walshard"
)

// An append answered 200 is in the shard's WAL in the bucket, before any
// flush or merge: a fresh read of the bucket alone finds its rows, while
// the base table holds none.
func TestAnAnsweredAppendIsInTheWAL(t *testing.T) {
	root := "file://" + t.TempDir()
	f := start(t, root, server.Options{})
	if _, err := f.c.CreateTable(ctx, "t", rollouts.Schema); err != nil {
		t.Fatal(err)
	}
	rec := rollouts.Batch(testenv.Allocator(t), 42, 0, 0, 30)
	defer rec.Release()
	if _, err := f.c.Append(ctx, "t", rec); err != nil {
		t.Fatal(err)
	}
	b, err := blob.Open(ctx, root+"/t")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	base, err := table.Open(ctx, b, nil)
	if err != nil || base.Manifest().Rows() != 0 {
		t.Fatalf("the base table holds %v rows (%v); the append was to stay in the WAL", base.Manifest().Rows(), err)
	}
	var n int64
	for rec, err := range walshard.ScanFleet(ctx, b, table.ScanOptions{}) {
		if err != nil {
			t.Fatal(err)
		}
		n += rec.NumRows()
	}
	if n != 30 {
		t.Fatalf("the bucket holds %d of the 30 rows answered 200", n)
	}
}

// replica starts a server of instance id on root, and a client of it.
func replica(t *testing.T, root, instance string) *client.Client {
	t.Helper()
	srv, err := server.New(&server.Options{Bucket: root, Instance: instance,
		Log: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	if err != nil {
		t.Fatal(err)
	}
	h := httptest.NewUnstartedServer(nil)
	h.Config = srv.HTTPServer()
	h.Start()
	t.Cleanup(func() {
		h.Close()
		_ = srv.Shutdown(ctx)
	})
	c, err := client.New(h.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// Two replicas of different instance ids over one bucket write through
// shards of their own, srv-<instance>: each lists its own as its own and
// the other's as not, without the fields it cannot know of it.
func TestReplicasWriteThroughShardsOfTheirOwn(t *testing.T) {
	root := "file://" + t.TempDir()
	a, b := replica(t, root, "a"), replica(t, root, "b")
	if _, err := a.CreateTable(ctx, "t", rollouts.Schema); err != nil {
		t.Fatal(err)
	}
	for i, c := range []*client.Client{a, b} {
		rec := rollouts.Batch(testenv.Allocator(t), 42, i, 0, 5)
		_, err := c.Append(ctx, "t", rec)
		rec.Release()
		if err != nil {
			t.Fatal(err)
		}
	}
	for name, c := range map[string]*client.Client{"a": a, "b": b} {
		st, err := c.LSMStats(ctx, "t", false)
		if err != nil {
			t.Fatal(err)
		}
		var own, others []string
		for _, s := range st.Shards {
			if s.Own {
				own = append(own, s.Shard)
			} else {
				others = append(others, s.Shard)
				// What this server cannot know of another's shard is absent.
				if s.MemtableRows != nil || s.MemtableFrom != nil || s.MemtableBytes != nil || s.Merging != nil {
					t.Fatalf("replica %s reports memtable or merge fields of %s, which it does not own: %+v", name, s.Shard, s)
				}
			}
			if s.PendingRows != nil {
				t.Fatalf("replica %s reports pending rows of %s unasked", name, s.Shard)
			}
		}
		other := map[string]string{"a": "b", "b": "a"}[name]
		if !slices.Equal(own, []string{"srv-" + name}) || !slices.Contains(others, "srv-"+other) {
			t.Fatalf("replica %s owns %v and sees %v besides", name, own, others)
		}
	}
}
