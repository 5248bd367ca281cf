package table

import (
	"sync"

	"github.com/stratadb/strata/table/format"
)

// footers holds the Parquet footers (each with its 8-byte trailer) of the
// fragments a snapshot's scans read, by object key: a fragment's object
// never changes, so a scan that comes back to it — the next scan of the
// snapshot, a trainer's next epoch — asks only for the column chunks it
// reads, one request a fragment rather than two. Bounded by the footers'
// bytes; past the bound, footers are not kept.
type footers struct {
	mu    sync.Mutex
	m     map[string][]byte
	bytes int64
}

const footersBytes = 32 << 20

// get returns the footer of the object key (size bytes) a scan read, or
// nil.
func (c *footers) get(key string, size int64) []byte {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if f := c.m[key]; int64(len(f)) <= size {
		return f
	}
	return nil
}

// remember records the footer at the end of tail, the last bytes of the
// object key (size bytes), when tail holds it whole: a copy, as tail is
// another's buffer.
func (c *footers) remember(key string, size int64, tail []byte) {
	n := int64(len(tail))
	if c == nil || n < 12 || n > size {
		return
	}
	footer, ok := format.FooterLen(tail[n-8:])
	if footer += 8; !ok || footer > n || c.get(key, size) != nil {
		return
	}
	c.keep(key, append([]byte(nil), tail[n-footer:]...))
}

// keep records footer, the object key's footer and trailer, its own, as
// the footers' bound allows.
func (c *footers) keep(key string, footer []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.m[key]; ok || c.bytes+int64(len(footer)) > footersBytes {
		return
	}
	if c.m == nil {
		c.m = map[string][]byte{}
	}
	c.m[key] = footer
	c.bytes += int64(len(footer))
}
