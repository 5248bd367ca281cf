package engine

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"sync/atomic"

	"golang.org/x/sync/errgroup"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/table"
	"github.com/stratadb/strata/table/evolve"
	"github.com/stratadb/strata/table/format"
)

// Copying a table. Copy makes the table at dst a copy of the one at src:
// its versions, from the oldest src keeps (or FromVersion) to its latest,
// each version's objects before its manifest, so that every manifest the
// copy holds at any moment has all its objects there — a copy cut short
// is a table, at the last version it copied. Every object copied is read
// back and checked against the source by its SHA-256; a manifest is
// created put-if-absent, and one there already must be the source's,
// byte for byte, or the copy stops (the copy was written to since, or is
// another table). Run again, Copy goes on from the copy's latest version:
// the objects of the versions it holds are not looked at again, and an
// object of a version not yet copied that a run cut short left behind is
// checked against the source, not written again. The copy gets the
// table's tags of the versions it holds and the schema markers of its
// versions (see evolve.MarkSchema); not its shards' WAL (rows acknowledged
// and not merged are in no version: checkpoint first), its consumers and
// groups (a reader's state), its compaction history or its Iceberg view
// (strata export iceberg makes one).

// CopyOptions shape a Copy.
type CopyOptions struct {
	// FromVersion: the first version to copy into an empty destination
	// (0: the oldest the source keeps).
	FromVersion uint64
	// Parallel: objects copied at once (default 8).
	Parallel int
	// Progress, when set, hears of each version copied.
	Progress func(CopyProgress)
}

// CopyProgress is where a Copy is.
type CopyProgress struct {
	Version, Last uint64 // the version just copied, and the last to copy
	Objects       int    // objects copied so far
	Bytes         int64
}

// CopyResult is what a Copy did.
type CopyResult struct {
	From, To uint64 // the versions the copy holds after it (From: the oldest this run or an earlier one copied)
	Versions int    // manifests this run copied
	Objects  int    // objects it copied
	Checked  int    // objects it found there already, and checked
	Bytes    int64  // bytes it copied
	Tags     int    // tags it copied
	UpToDate bool   // the copy held the source's latest version already
}

// ErrCopyDiverged: the destination holds a version that is not the
// source's (it was written to since the last copy, or is another table).
var ErrCopyDiverged = errors.New("engine: the copy's versions are not the source's")

// Copy copies the table at src to dst (see above).
func Copy(ctx context.Context, src, dst blob.Bucket, o CopyOptions) (CopyResult, error) {
	if o.Parallel <= 0 {
		o.Parallel = 8
	}
	var res CopyResult
	last, err := table.LatestVersion(ctx, src)
	if err != nil {
		return res, fmt.Errorf("the source: %w", err)
	}
	c := &tableCopy{src: src, dst: dst, o: o, known: map[string]bool{}}
	first, err := c.start(ctx, last, &res)
	if err != nil || res.UpToDate {
		return res, err
	}
	for v := first; v <= last; v++ {
		if err := c.version(ctx, v, last, &res); err != nil {
			return res, err
		}
		res.To = v
	}
	res.Tags, err = c.tags(ctx, res.From, res.To)
	return res, err
}

type tableCopy struct {
	src, dst blob.Bucket
	o        CopyOptions
	known    map[string]bool // objects the copy holds, checked
	schemaID uint64          // of the copy's newest version
	objects  atomic.Int64
	bytes    atomic.Int64
}

// start finds the first version to copy: after the copy's latest, or
// from FromVersion (or the source's oldest) into an empty destination.
func (c *tableCopy) start(ctx context.Context, last uint64, res *CopyResult) (uint64, error) {
	have, err := table.LatestVersion(ctx, c.dst)
	if errors.Is(err, format.ErrNotFound) {
		oldest, err := oldestVersion(ctx, c.src)
		if err != nil {
			return 0, err
		}
		first := max(c.o.FromVersion, oldest)
		if c.o.FromVersion > last {
			return 0, fmt.Errorf("%w: version %d: the source's latest is %d", format.ErrVersionNotFound, c.o.FromVersion, last)
		}
		if c.o.FromVersion != 0 && c.o.FromVersion < oldest {
			return 0, fmt.Errorf("%w: version %d was collected from the source; the oldest it keeps is %d", format.ErrVersionNotFound, c.o.FromVersion, oldest)
		}
		res.From = first
		return first, nil
	}
	if err != nil {
		return 0, fmt.Errorf("the copy: %w", err)
	}
	if c.o.FromVersion != 0 {
		return 0, fmt.Errorf("%w: --from-version is for a first copy; the copy holds versions up to %d, and goes on from there", ErrInvalidOptions, have)
	}
	// The copy's newest version must be the source's.
	mine, err := c.dst.Get(ctx, format.ManifestKey(have))
	if err != nil {
		return 0, fmt.Errorf("the copy: %w", err)
	}
	theirs, err := c.src.Get(ctx, format.ManifestKey(have))
	switch {
	case errors.Is(err, blob.ErrNotFound) && have < last:
		// Collected from the source since: its table id says whether the
		// copy is of this table.
		if err := c.sameTable(ctx, mine, last); err != nil {
			return 0, err
		}
	case err != nil:
		return 0, fmt.Errorf("the source, version %d: %w", have, err)
	case !bytes.Equal(mine, theirs):
		return 0, fmt.Errorf("%w: version %d differs (the copy was written to, or is of another table)", ErrCopyDiverged, have)
	}
	m, err := format.DecodeManifest(format.ManifestKey(have), mine)
	if err != nil {
		return 0, err
	}
	for _, k := range m.Objects() {
		c.known[k] = true
	}
	c.schemaID = evolve.SchemaID(m.Schema())
	res.From, res.To = oldestOr(ctx, c.dst, have), have
	if have >= last {
		res.UpToDate = true
	}
	return have + 1, nil
}

// sameTable refuses a copy whose manifest mine is of another table than
// the source's latest.
func (c *tableCopy) sameTable(ctx context.Context, mine []byte, last uint64) error {
	m, err := format.DecodeManifest("the copy's latest manifest", mine)
	if err != nil {
		return err
	}
	theirs, err := table.ReadManifest(ctx, c.src, last)
	if err != nil {
		return err
	}
	if m.TableID != theirs.TableID {
		return fmt.Errorf("%w: the copy is of table %s, the source is table %s", ErrCopyDiverged, m.TableID, theirs.TableID)
	}
	return nil
}

// version copies version v: its objects the copy lacks, a schema marker
// if it raised the schema, then its manifest.
func (c *tableCopy) version(ctx context.Context, v, last uint64, res *CopyResult) error {
	key := format.ManifestKey(v)
	data, err := c.src.Get(ctx, key)
	if errors.Is(err, blob.ErrNotFound) {
		return fmt.Errorf("%w: version %d was collected from the source during the copy; run the copy again (with --from-version for a first copy)", format.ErrVersionNotFound, v)
	}
	if err != nil {
		return err
	}
	m, err := format.DecodeManifest(key, data)
	if err != nil {
		return err
	}
	if err := m.CheckWritable(); err != nil {
		// A newer build's version may reference objects this build
		// does not know: its copy would lack them.
		return err
	}
	var need []string
	for _, k := range m.Objects() {
		if !c.known[k] {
			need = append(need, k)
		}
	}
	slices.Sort(need)
	need = slices.Compact(need)
	checked, err := c.objectsOf(ctx, need)
	if err != nil {
		return fmt.Errorf("copying version %d: %w", v, err)
	}
	res.Objects += len(need) - checked
	res.Checked += checked
	if id := evolve.SchemaID(m.Schema()); id > c.schemaID {
		// The marker before the version that raises the schema, as a
		// commit makes it (a shard writing to the copy relies on it).
		if err := evolve.MarkSchema(ctx, c.dst, id); err != nil {
			return err
		}
		c.schemaID = id
	}
	if err := c.dst.PutIfAbsent(ctx, key, data); errors.Is(err, blob.ErrExists) {
		there, gerr := c.dst.Get(ctx, key)
		if gerr != nil {
			return gerr
		}
		if !bytes.Equal(there, data) {
			return fmt.Errorf("%w: the copy's version %d is not the source's (was it written to?)", ErrCopyDiverged, v)
		}
	} else if err != nil {
		return err
	}
	there, err := c.dst.Get(ctx, key)
	if err != nil {
		return fmt.Errorf("reading back the copy's version %d: %w", v, err)
	}
	if !bytes.Equal(there, data) {
		return fmt.Errorf("%w: the copy's version %d does not read back as written", format.ErrCorrupt, v)
	}
	res.Versions++
	res.Bytes = c.bytes.Load()
	for _, k := range need {
		c.known[k] = true
	}
	if c.o.Progress != nil {
		c.o.Progress(CopyProgress{Version: v, Last: last, Objects: int(c.objects.Load()), Bytes: c.bytes.Load()})
	}
	return nil
}

// objectsOf copies keys, Parallel at a time, and returns how many were
// there already (and checked).
func (c *tableCopy) objectsOf(ctx context.Context, keys []string) (int, error) {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(c.o.Parallel)
	var mu sync.Mutex
	checked := 0
	for _, k := range keys {
		g.Go(func() error {
			there, err := c.object(gctx, k)
			if there {
				mu.Lock()
				checked++
				mu.Unlock()
			}
			return err
		})
	}
	return checked, g.Wait()
}

// object copies one immutable object, or checks the one there: the
// source's and the copy's SHA-256 must match.
func (c *tableCopy) object(ctx context.Context, key string) (there bool, err error) {
	if _, err := c.dst.Attributes(ctx, key); err == nil {
		there = true
	} else if !errors.Is(err, blob.ErrNotFound) {
		return false, err
	}
	want, n, err := c.hashOf(ctx, c.src, key, there)
	if err != nil {
		return there, fmt.Errorf("the source's %s: %w", key, err)
	}
	got, _, err := c.hashOf(ctx, c.dst, key, true)
	if err != nil {
		return there, fmt.Errorf("the copy's %s: %w", key, err)
	}
	if got != want {
		return there, fmt.Errorf("%w: the copy's %s does not match the source's (SHA-256 %x, the source's %x)", format.ErrCorrupt, key, got[:8], want[:8])
	}
	if !there {
		c.objects.Add(1)
		c.bytes.Add(n)
	}
	return there, nil
}

// hashOf reads key from b and returns its SHA-256 and size; unless
// readOnly, it writes what it reads to the copy as it goes.
func (c *tableCopy) hashOf(ctx context.Context, b blob.Bucket, key string, readOnly bool) ([sha256.Size]byte, int64, error) {
	var sum [sha256.Size]byte
	r, err := b.NewRangeReader(ctx, key, 0, -1)
	if err != nil {
		return sum, 0, err
	}
	defer r.Close()
	h := sha256.New()
	cr := &countingReader{r: io.TeeReader(r, h)}
	if readOnly {
		_, err = io.Copy(io.Discard, cr)
	} else {
		err = c.dst.Put(ctx, key, cr)
	}
	if err != nil {
		return sum, 0, err
	}
	copy(sum[:], h.Sum(nil))
	return sum, cr.n, nil
}

type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// tags copies the source's tags of the versions from..to the copy holds
// and it lacks.
func (c *tableCopy) tags(ctx context.Context, from, to uint64) (int, error) {
	tags, err := table.Tags(ctx, c.src)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, t := range tags {
		if t.Version < from || t.Version > to {
			continue
		}
		key := format.TagsDir + t.Name + ".json"
		data, err := c.src.Get(ctx, key)
		if errors.Is(err, blob.ErrNotFound) {
			continue // deleted since the listing
		}
		if err != nil {
			return n, err
		}
		if err := c.dst.PutIfAbsent(ctx, key, data); err == nil {
			n++
		} else if !errors.Is(err, blob.ErrExists) {
			return n, err
		}
	}
	return n, nil
}

// oldestVersion is the oldest version of the run of versions b holds
// that ends at its newest: a version below a gap is a ghost (a collected
// version a stalled writer made again, which the next collection takes).
func oldestVersion(ctx context.Context, b blob.Bucket) (uint64, error) {
	var oldest uint64
	for o, err := range blob.List(ctx, b, format.VersionsDir, 0) {
		if err != nil {
			return 0, err
		}
		v, ok := format.ParseManifestKey(o.Key)
		if !ok {
			continue
		}
		// The listing is newest first (the names are inverted).
		if oldest != 0 && v != oldest-1 {
			break
		}
		oldest = v
	}
	if oldest == 0 {
		return 0, format.ErrNotFound
	}
	return oldest, nil
}

// oldestOr is b's oldest version, or v when it cannot be listed.
func oldestOr(ctx context.Context, b blob.Bucket, v uint64) uint64 {
	if o, err := oldestVersion(ctx, b); err == nil {
		return o
	}
	return v
}
