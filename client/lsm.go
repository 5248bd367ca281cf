package client

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/stratadb/strata/api"
	"github.com/stratadb/strata/internal/backoff"
)

// CheckpointOptions bound CheckpointLSM. Zero values mean defaults.
type CheckpointOptions struct {
	// Poll is the pause between polls (default 50ms).
	Poll time.Duration
	// MaxStalls is how many consecutive polls may show neither fewer
	// outstanding generations nor a running merge before it fails
	// (default 40).
	MaxStalls int
}

// CheckpointLSM makes every generation of every shard of the table that
// exists once the server's memtable is flushed merged into the base table,
// whoever wrote it:
//
//  1. it flushes the server's shard once;
//  2. it reads the stats of every shard and fixes a target: each shard's
//     newest generation, as read after the flush;
//  3. it triggers fleet merges on the server (every shard in one commit),
//     never while one runs;
//  4. it polls until no generation at or below its target awaits merging,
//     merged by anyone: the server, a worker's own merge, the Job.
//
// Generations made while it runs are not waited on, so it ends under
// sustained writes. Its bound is progress, not time: MaxStalls polls in a
// row with neither a drop in outstanding generations nor a running merge is
// an error. A caller wanting a wall-clock bound passes a context deadline.
func (c *Client) CheckpointLSM(ctx context.Context, name string, opts ...CheckpointOptions) error {
	var o CheckpointOptions
	if len(opts) > 0 {
		o = opts[0]
	}
	if o.Poll <= 0 {
		o.Poll = 50 * time.Millisecond
	}
	if o.MaxStalls <= 0 {
		o.MaxStalls = 40
	}
	before, err := c.LSMStats(ctx, name, false)
	if err != nil {
		return err
	}
	if err := c.Flush(ctx, name); err != nil {
		return err
	}
	target, err := c.checkpointTarget(ctx, name, before, o)
	if err != nil {
		return err
	}
	return c.mergeUpTo(ctx, name, target, o)
}

// checkpointTarget waits for the flush a checkpoint asked for and returns
// its target: each shard's newest generation once the flush is done.
func (c *Client) checkpointTarget(ctx context.Context, name string, before api.LSMStats, o CheckpointOptions) (map[string]uint64, error) {
	// The flush runs in the background: the target is read once no shard
	// that had rows in its memtable still holds one of the WAL entries
	// written before the checkpoint began. (A newer generation alone does
	// not say so: a flush already running when the checkpoint began may
	// hold only some of those rows. Nor does the flushed WAL position: a
	// shard opened again after a restart writes a fence above its entries,
	// which no flush covers.)
	sealing := map[string]uint64{}
	for _, s := range before.Shards {
		if s.MemtableRows != nil && *s.MemtableRows > 0 {
			sealing[s.Shard] = s.WALLastWritten
		}
	}
	for stalls := 0; ; stalls++ {
		st, err := c.LSMStats(ctx, name, false)
		if err != nil {
			return nil, err
		}
		target := map[string]uint64{}
		waiting := 0
		for _, s := range st.Shards {
			target[s.Shard] = s.NewestGeneration
			if pos, ok := sealing[s.Shard]; ok && s.MemtableFrom != nil && *s.MemtableFrom != 0 && *s.MemtableFrom <= pos {
				waiting++
			}
		}
		if waiting == 0 {
			return target, nil
		}
		if stalls >= o.MaxStalls {
			return nil, fmt.Errorf("client: checkpoint of %s: the flush made no generation in %d polls", name, stalls)
		}
		if stalls%10 == 9 {
			// Rows that reached the memtable just after the flush began
			// wait for the next one: ask for it.
			if err := c.Flush(ctx, name); err != nil {
				return nil, err
			}
		}
		if err := backoff.Sleep(ctx, o.Poll); err != nil {
			return nil, err
		}
	}
}

// mergeUpTo triggers fleet merges, never while one runs, until no
// generation at or below target awaits merging.
func (c *Client) mergeUpTo(ctx context.Context, name string, target map[string]uint64, o CheckpointOptions) error {
	outstanding := func() (int, bool, error) {
		st, err := c.LSMStats(ctx, name, false)
		if err != nil {
			return 0, false, err
		}
		n, merging := 0, st.Merging
		for _, s := range st.Shards {
			t, ok := target[s.Shard]
			if !ok {
				continue
			}
			if s.Watermark < t {
				n += int(t - s.Watermark)
			}
			merging = merging || (s.Merging != nil && *s.Merging)
		}
		return n, merging, nil
	}
	last, merging, err := outstanding()
	if err != nil {
		return err
	}
	stalls := 0
	for last > 0 {
		if !merging {
			if err := c.Merge(ctx, name); err != nil && !IsStatus(err, http.StatusTooManyRequests) {
				return err
			}
		}
		if err := backoff.Sleep(ctx, o.Poll); err != nil {
			return err
		}
		n, m, err := outstanding()
		if err != nil {
			return err
		}
		// A poll that finds a merge running counts neither way; one that
		// finds none running and no fewer generations waiting is a stall,
		// so that merges that keep failing are found out however long
		// each takes.
		switch {
		case n < last:
			stalls = 0
		case m:
		default:
			if stalls++; stalls >= o.MaxStalls {
				return fmt.Errorf("client: checkpoint of %s made no progress in %d polls: %d generations at or below the target still await merging", name, stalls, n)
			}
		}
		last, merging = n, m
	}
	return nil
}

// Flush asks the server to seal its memtable into a generation (202).
func (c *Client) Flush(ctx context.Context, name string) error {
	return c.call(ctx, http.MethodPost, c.url(name, "/lsm/flush", nil), "", nil, "").none()
}

// Merge asks the server for a fleet merge: every shard's flushed
// generations installed in the table in one commit, in the background
// (202; POST …/lsm/merge). A 429 (merge already running) is returned as an
// *Error, not retried. A merge rewrites no fragment: that is Compact.
func (c *Client) Merge(ctx context.Context, name string) error {
	once := &Client{base: c.base, opts: c.opts}
	once.opts.Retries = 0
	return once.call(ctx, http.MethodPost, c.url(name, "/lsm/merge", nil), "", nil, "").none()
}

// LSMStats returns every shard's stats.
func (c *Client) LSMStats(ctx context.Context, name string, withRows bool) (api.LSMStats, error) {
	q := url.Values{"include_generation_rows": {strconv.FormatBool(withRows)}}
	var out api.LSMStats
	return out, c.call(ctx, http.MethodGet, c.url(name, "/lsm/stats", q), "", nil, "").json(&out)
}
