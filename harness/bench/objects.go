package bench

import (
	"context"
	"errors"
	"io"
	"strings"
	"sync/atomic"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/table/format"
)

// The fleet mode says where its requests go: each request a fleet's
// process makes is counted by the kind of object it touches (objectKinds)
// and the kind of request (put, get, list, delete), as blob.Counted counts
// them, so that the cost model can be read against the protocol.

// The objects a fleet touches.
const (
	objWAL = iota
	objShardState
	objGeneration
	objEpochClaim
	objQuarantine
	objFlush
	objAnnouncement
	objMergeRecord
	objRegistration
	objManifest
	objFragment
	objCompactor
	objIceberg
	objGC
	objOther
	objMixed // a batched delete of several kinds
	numObjects
)

// objectKinds name them in the reports.
var objectKinds = [numObjects]string{
	"wal", "shard_state", "generation", "epoch_claim", "quarantine",
	"flush", "announcement", "merge_record", "registration",
	"manifest", "fragment", "compactor", "iceberg", "gc", "other", "mixed",
}

// Request kinds, as blob.Counted counts them: PUTs and conditional
// creates; GETs, ranged GETs and HEADs; LIST pages; DELETEs (a batch is
// one).
const (
	reqPut = iota
	reqGet
	reqList
	reqDelete
	numRequests
)

var requestKinds = [numRequests]string{"put", "get", "list", "delete"}

// Where the objects live: under a shard's folder, and under the table's.
var (
	shardObjects = []struct {
		dir  string
		kind int
	}{{"wal/", objWAL}, {"state/", objShardState}, {"gen/", objGeneration}, {"epochs/", objEpochClaim}, {"quarantine/", objQuarantine}}
	tableObjects = []struct {
		dir  string
		kind int
	}{{format.FleetFlushDir, objFlush}, {format.FleetPendingDir, objAnnouncement}, {format.FleetMergedDir, objMergeRecord}, {format.FleetShardsDir, objRegistration},
		{format.VersionsDir, objManifest}, {format.DataDir, objFragment}, {"_compactor/", objCompactor}, // its leases and history
		{format.IcebergDir, objIceberg}, {format.GCBoundaryDir, objGC}, {format.GCClockDir, objGC}}
)

// objectKind is the kind of object at key (or under a listed prefix).
func objectKind(key string) int {
	if rest, ok := strings.CutPrefix(key, format.ShardsDir); ok {
		_, sub, _ := strings.Cut(rest, "/")
		for _, o := range shardObjects {
			if strings.HasPrefix(sub, o.dir) {
				return o.kind
			}
		}
		return objOther
	}
	for _, o := range tableObjects {
		if strings.HasPrefix(key, o.dir) {
			return o.kind
		}
	}
	return objOther
}

// objectTally counts requests by object kind and request kind.
type objectTally [numObjects][numRequests]atomic.Int64

// tallyCounts are an objectTally's counts at one moment.
type tallyCounts [numObjects][numRequests]int64

func (t *objectTally) add(key string, req int) { t[objectKind(key)][req].Add(1) }

// snapshot returns the counts so far.
func (t *objectTally) snapshot() tallyCounts {
	var s tallyCounts
	for i := range t {
		for j := range t[i] {
			s[i][j] = t[i][j].Load()
		}
	}
	return s
}

// byObject reports the counts made since before, per shard and minute,
// as "object/request" → count, leaving out what was never asked.
func byObject(now, before tallyCounts, writers int, minutes float64) map[string]float64 {
	out := map[string]float64{}
	for i := range now {
		for j := range now[i] {
			if n := now[i][j] - before[i][j]; n > 0 {
				out[objectKinds[i]+"/"+requestKinds[j]] = perShardMinute(n, writers, minutes)
			}
		}
	}
	return out
}

// fleetBucket is a fleet process's bucket: it counts its requests by
// object (objectTally) and the manifest creates it lost to another
// process.
type fleetBucket struct {
	blob.Bucket
	conflicts *atomic.Int64
	tally     *objectTally
}

func (c *fleetBucket) Get(ctx context.Context, key string) ([]byte, error) {
	c.tally.add(key, reqGet)
	return c.Bucket.Get(ctx, key)
}

func (c *fleetBucket) NewRangeReader(ctx context.Context, key string, offset, length int64) (io.ReadCloser, error) {
	c.tally.add(key, reqGet)
	return c.Bucket.NewRangeReader(ctx, key, offset, length)
}

func (c *fleetBucket) Attributes(ctx context.Context, key string) (blob.Attributes, error) {
	c.tally.add(key, reqGet)
	return c.Bucket.Attributes(ctx, key)
}

func (c *fleetBucket) PutIfAbsent(ctx context.Context, key string, data []byte) error {
	err := c.Bucket.PutIfAbsent(ctx, key, data)
	c.tally.add(key, reqPut) // on its answer, as blob.Counted counts it
	if errors.Is(err, blob.ErrExists) && strings.HasPrefix(key, format.VersionsDir) {
		c.conflicts.Add(1)
	}
	return err
}

func (c *fleetBucket) Put(ctx context.Context, key string, r io.Reader) error {
	c.tally.add(key, reqPut)
	return c.Bucket.Put(ctx, key, r)
}

func (c *fleetBucket) Delete(ctx context.Context, key string) error {
	c.tally.add(key, reqDelete)
	return c.Bucket.Delete(ctx, key)
}

func (c *fleetBucket) ListPage(ctx context.Context, prefix, token string, pageSize int) (blob.Page, error) {
	c.tally.add(prefix, reqList)
	return c.Bucket.ListPage(ctx, prefix, token, pageSize)
}

func (c *fleetBucket) ListDir(ctx context.Context, prefix, token string, pageSize int) (blob.DirPage, error) {
	c.tally.add(prefix, reqList)
	return c.Bucket.ListDir(ctx, prefix, token, pageSize)
}

// Unwrap lets blob.StatsOf reach the counted bucket underneath.
func (c *fleetBucket) Unwrap() blob.Bucket { return c.Bucket }

// DeleteBatch passes batched deletes through, so that they stay batched:
// one request, counted under its keys' object, or "mixed" when they are
// of several.
func (c *fleetBucket) DeleteBatch(ctx context.Context, keys []string) error {
	d, ok := c.Bucket.(blob.BatchDeleter)
	if !ok {
		return errors.ErrUnsupported
	}
	err := d.DeleteBatch(ctx, keys)
	if len(keys) > 0 && !errors.Is(err, errors.ErrUnsupported) {
		kind := objectKind(keys[0])
		for _, k := range keys[1:] {
			if objectKind(k) != kind {
				kind = objMixed
				break
			}
		}
		c.tally[kind][reqDelete].Add(1)
	}
	return err
}
