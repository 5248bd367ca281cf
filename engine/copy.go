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
	"time"

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
	Tags     int    // tags it copied, or moved to the version the source's names
	// TagsOnlyHere: the copy's tags the source no longer has (kept: a
	// copy's tag is its own to delete).
	TagsOnlyHere []string
	UpToDate     bool // the copy held the source's latest version already
}

// ErrCopyDiverged: the destination holds a version that is not the
// source's (it was written to since the last copy, or is another table).
var ErrCopyDiverged = errors.New("engine: the copy's versions are not the source's")

// ErrCopyBehind: the source no longer holds the copy's newest version
// (its garbage collection took it since the last copy), so the copy
// cannot be checked against the source, nor go on without a gap: copy
// anew, into an empty folder.
var ErrCopyBehind = errors.New("engine: the source no longer holds the copy's newest version")

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
	// The source's newest version first: a table this build cannot read,
	// or may not write, is not copied at all (its copy could lack what
	// this build does not know of).
	newest, err := table.ReadManifest(ctx, src, last)
	if err != nil {
		return res, fmt.Errorf("the source: %w", err)
	}
	if err := newest.CheckWritable(); err != nil {
		return res, fmt.Errorf("the source: %w", err)
	}
	c := &tableCopy{src: src, dst: dst, o: o, known: map[string]bool{}}
	versions, err := c.start(ctx, newest, &res)
	if err != nil {
		return res, err
	}
	for _, v := range versions {
		if err := c.version(ctx, v, last, &res); err != nil {
			return res, err
		}
		res.To = v
	}
	res.Tags, res.TagsOnlyHere, err = c.tags(ctx, res.From, res.To)
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

// start returns the versions to copy: those after the copy's latest, or,
// into an empty destination, from FromVersion (or the oldest of the run
// of versions the source holds up to its newest, and the tagged versions
// below that run: the source's collection kept them).
func (c *tableCopy) start(ctx context.Context, newest *format.Manifest, res *CopyResult) ([]uint64, error) {
	last := newest.Version
	have, err := table.LatestVersion(ctx, c.dst)
	if errors.Is(err, format.ErrNotFound) {
		held, err := heldVersions(ctx, c.src)
		if err != nil {
			return nil, fmt.Errorf("the source: %w", err)
		}
		// Above the source's collection boundary, or tagged: at or below
		// it, an untagged version is a ghost (a collected version a
		// stalled writer made again, which the next collection takes).
		collected, err := table.GCBoundary(ctx, c.src)
		if err != nil {
			return nil, fmt.Errorf("the source: %w", err)
		}
		oldest := oldestOfRun(held, collected)
		switch {
		case c.o.FromVersion > last:
			return nil, fmt.Errorf("%w: --from-version %d: the source's latest version is %d", ErrInvalidOptions, c.o.FromVersion, last)
		case c.o.FromVersion != 0 && c.o.FromVersion < oldest:
			return nil, fmt.Errorf("%w: --from-version %d: the source's garbage collection took it; the oldest version it holds from there on is %d", ErrInvalidOptions, c.o.FromVersion, oldest)
		}
		tags, err := table.Tags(ctx, c.src)
		if err != nil {
			return nil, fmt.Errorf("the source: %w", err)
		}
		var versions []uint64
		for _, v := range held {
			tagged := slices.ContainsFunc(tags, func(t table.Tag) bool { return t.Version == v })
			if v >= c.o.FromVersion && v <= last && (v >= oldest || tagged) {
				versions = append(versions, v)
			}
		}
		slices.Sort(versions)
		res.From = versions[0]
		return versions, nil
	}
	if err != nil {
		return nil, fmt.Errorf("the copy: %w", err)
	}
	if c.o.FromVersion != 0 {
		return nil, fmt.Errorf("%w: --from-version is for a first copy; the copy holds versions up to %d, and goes on from there", ErrInvalidOptions, have)
	}
	mine, err := c.dst.Get(ctx, format.ManifestKey(have))
	if err != nil {
		return nil, fmt.Errorf("the copy: %w", err)
	}
	m, err := format.DecodeManifest(format.ManifestKey(have), mine)
	if err != nil {
		return nil, fmt.Errorf("the copy: %w", err)
	}
	if m.TableID != newest.TableID {
		return nil, fmt.Errorf("%w: the copy is of table %s, the source is table %s", ErrCopyDiverged, m.TableID, newest.TableID)
	}
	if have > last {
		return nil, fmt.Errorf("%w: the copy holds version %d, past the source's latest %d (it was written to)", ErrCopyDiverged, have, last)
	}
	// The copy's newest version must be the source's, byte for byte.
	theirs, err := c.src.Get(ctx, format.ManifestKey(have))
	switch {
	case errors.Is(err, blob.ErrNotFound):
		return nil, fmt.Errorf("%w: version %d, collected from the source since the last copy, which its garbage collection keeps %s: copy anew, into an empty folder, and again more often than that",
			ErrCopyBehind, have, "for a while (by default the newest 10 versions, and those younger than an hour)")
	case err != nil:
		return nil, fmt.Errorf("the source, version %d: %w", have, err)
	case !bytes.Equal(mine, theirs):
		return nil, fmt.Errorf("%w: version %d differs (the copy was written to)", ErrCopyDiverged, have)
	}
	for _, k := range m.Objects() {
		c.known[k] = true
	}
	c.schemaID = evolve.SchemaID(m.Schema())
	res.From, res.To = oldestOr(ctx, c.dst, have), have
	res.UpToDate = have == last
	var versions []uint64
	for v := have + 1; v <= last; v++ {
		versions = append(versions, v)
	}
	return versions, nil
}

// version copies version v: its objects the copy lacks, a schema marker
// if it raised the schema, then its manifest.
func (c *tableCopy) version(ctx context.Context, v, last uint64, res *CopyResult) error {
	key := format.ManifestKey(v)
	data, err := c.src.Get(ctx, key)
	if errors.Is(err, blob.ErrNotFound) {
		return fmt.Errorf("%w: version %d was collected from the source during the copy (the copy holds the versions before it): copy anew, into an empty folder", ErrCopyBehind, v)
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
	// Created, or there already (a run cut short after it): read back
	// once, it must be the source's, byte for byte.
	err = c.dst.PutIfAbsent(ctx, key, data)
	existed := errors.Is(err, blob.ErrExists)
	if err != nil && !existed {
		return err
	}
	there, err := c.dst.Get(ctx, key)
	switch {
	case err != nil:
		return fmt.Errorf("reading back the copy's version %d: %w", v, err)
	case !bytes.Equal(there, data) && existed:
		return fmt.Errorf("%w: the copy's version %d is not the source's (was it written to?)", ErrCopyDiverged, v)
	case !bytes.Equal(there, data):
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
	if a, err := c.dst.Attributes(ctx, key); err == nil {
		// Left by a run cut short, and no manifest of the copy holds it:
		// one older than a minute is written again, so that a collection
		// of the copy (which takes no object younger than
		// format.MinGCAge) never takes it for garbage once checked.
		there = time.Since(a.ModTime) < time.Minute
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
	if got != want && there {
		// Left damaged by a run cut short (no manifest of the copy
		// references it yet): written again.
		there = false
		if want, n, err = c.hashOf(ctx, c.src, key, false); err != nil {
			return false, fmt.Errorf("the source's %s: %w", key, err)
		}
		if got, _, err = c.hashOf(ctx, c.dst, key, true); err != nil {
			return false, fmt.Errorf("the copy's %s: %w", key, err)
		}
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

// tags copies the source's tags of the versions from..to the copy holds,
// and moves a tag of the copy to the version the source's names; it
// returns how many it copied or moved, and the copy's tags the source no
// longer has.
func (c *tableCopy) tags(ctx context.Context, from, to uint64) (int, []string, error) {
	theirs, err := table.Tags(ctx, c.src)
	if err != nil {
		return 0, nil, err
	}
	mine, err := table.Tags(ctx, c.dst)
	if err != nil {
		return 0, nil, err
	}
	boundary, err := table.GCBoundary(ctx, c.dst)
	if err != nil {
		return 0, nil, err
	}
	n := 0
	for _, t := range theirs {
		if t.Version < from || t.Version > to || t.Version <= boundary {
			continue // a version the copy does not hold, or may not keep
		}
		if _, err := c.dst.Attributes(ctx, format.ManifestKey(t.Version)); errors.Is(err, blob.ErrNotFound) {
			continue
		} else if err != nil {
			return n, nil, err
		}
		key := format.TagKey(t.Name)
		data, err := c.src.Get(ctx, key)
		if errors.Is(err, blob.ErrNotFound) {
			continue // deleted since the listing
		}
		if err != nil {
			return n, nil, err
		}
		i := slices.IndexFunc(mine, func(m table.Tag) bool { return m.Name == t.Name })
		switch {
		case i < 0:
			err = c.dst.PutIfAbsent(ctx, key, data)
		case mine[i].Version != t.Version:
			err = c.dst.Put(ctx, key, bytes.NewReader(data)) // moved in the source
		default:
			continue
		}
		if err != nil && !errors.Is(err, blob.ErrExists) {
			return n, nil, err
		}
		n++
	}
	var onlyHere []string
	for _, m := range mine {
		if !slices.ContainsFunc(theirs, func(t table.Tag) bool { return t.Name == m.Name }) {
			onlyHere = append(onlyHere, m.Name)
		}
	}
	return n, onlyHere, nil
}

// heldVersions lists the versions b holds, newest first.
func heldVersions(ctx context.Context, b blob.Bucket) ([]uint64, error) {
	vs, err := table.Versions(ctx, b, 0, false)
	if err != nil {
		return nil, err
	}
	held := make([]uint64, len(vs))
	for i, v := range vs {
		held[i] = v.Version
	}
	return held, nil
}

// oldestOfRun is the oldest version of the run of held (newest first)
// that ends at the newest, above collected: below are tagged versions
// garbage collection kept, and ghosts.
func oldestOfRun(held []uint64, collected uint64) uint64 {
	oldest := held[0]
	for _, v := range held[1:] {
		if v != oldest-1 || v <= collected {
			break
		}
		oldest = v
	}
	return oldest
}

// oldestOr is b's oldest version, or v when it cannot be listed.
func oldestOr(ctx context.Context, b blob.Bucket, v uint64) uint64 {
	if held, err := heldVersions(ctx, b); err == nil {
		return held[len(held)-1]
	}
	return v
}
