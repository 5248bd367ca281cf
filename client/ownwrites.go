package client

import (
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/stratadb/strata/api"
)

// wrote records an acknowledged append's WAL position.
func (c *Client) wrote(name string, res api.AppendResult) {
	if res.Shard == "" || res.Position == 0 {
		return
	}
	c.written.Lock()
	defer c.written.Unlock()
	if c.written.by == nil {
		c.written.by = map[string]map[string]uint64{}
	}
	if c.written.by[name] == nil {
		c.written.by[name] = map[string]uint64{}
	}
	c.written.by[name][res.Shard] = max(c.written.by[name][res.Shard], res.Position)
}

// ownWrites adds written=SHARD:POSITION,… to q when the client appended
// to the table through shards (unless Options.IgnoreOwnWrites).
func (c *Client) ownWrites(name string, q url.Values) {
	if c.opts.IgnoreOwnWrites {
		return
	}
	c.written.Lock()
	defer c.written.Unlock()
	var parts []string
	for shard, pos := range c.written.by[name] {
		parts = append(parts, shard+":"+strconv.FormatUint(pos, 10))
	}
	if len(parts) > 0 {
		slices.Sort(parts)
		q.Set("written", strings.Join(parts, ","))
	}
}

// forget drops what the client wrote to a table (it is being dropped: a
// table created again under its name starts its shards afresh).
func (c *Client) forget(name string) {
	c.written.Lock()
	delete(c.written.by, name)
	c.written.Unlock()
}
