package table

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"slices"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/table/format"
)

// Snapshot is one version of a table, read-only. Its rows never change.
type Snapshot struct {
	b blob.Bucket
	m *format.Manifest
	// footers: those its scans read, for its scans to come (nil: none
	// kept, a Snapshot made as a literal).
	footers *footers
}

// OpenOptions choose the version to open; zero opens the latest.
type OpenOptions struct {
	Version uint64 // a version number
	Tag     string // or a tag
	// AsOf, or the newest version committed at or before this time
	// (VersionAsOf).
	AsOf time.Time
}

// Open opens a version of the table in b. With no options it opens the
// latest: one LIST page and one GET.
func Open(ctx context.Context, b blob.Bucket, opts *OpenOptions) (*Snapshot, error) {
	var o OpenOptions
	if opts != nil {
		o = *opts
	}
	var m *format.Manifest
	var err error
	switch {
	case o.Tag != "":
		var t Tag
		if t, err = ReadTag(ctx, b, o.Tag); err == nil {
			m, err = ReadManifest(ctx, b, t.Version)
		}
	case o.Version != 0:
		if m, err = ReadManifest(ctx, b, o.Version); err == nil {
			err = notAGhost(ctx, b, o.Version)
		}
	case !o.AsOf.IsZero():
		m, err = VersionAsOf(ctx, b, o.AsOf)
	default:
		m, err = ReadLatest(ctx, b)
	}
	if err != nil {
		return nil, err
	}
	return &Snapshot{b: b, m: m, footers: &footers{}}, nil
}

// NewSnapshot wraps a manifest already read.
func NewSnapshot(b blob.Bucket, m *format.Manifest) *Snapshot {
	return &Snapshot{b: b, m: m, footers: &footers{}}
}

// SnapshotOf makes a read-only view of fragment objects that no manifest
// lists yet (a shard's generations, say), to scan them as a table.
func SnapshotOf(b blob.Bucket, schema *arrow.Schema, fragments []format.Fragment) *Snapshot {
	m := format.ManifestOf(schema, fragments)
	for _, f := range fragments {
		m.NextFragmentID = max(m.NextFragmentID, f.ID+1)
	}
	return &Snapshot{b: b, m: m, footers: &footers{}}
}

// ScanRowsOf scans fragments read in schema, as the fragments of version
// v (an error names it): with rows, only the rows at the offsets it names
// of each fragment (the rows a version inserted or deleted, for the change
// feed); without, every live row.
func ScanRowsOf(ctx context.Context, b blob.Bucket, schema *arrow.Schema, v uint64, fragments []format.Fragment, rows map[uint64][]uint32, opts ScanOptions) iter.Seq2[arrow.RecordBatch, error] {
	s := SnapshotOf(b, schema, fragments)
	s.m.Version = v
	opts.rows = rows
	return s.Scan(ctx, opts)
}

// Manifest returns the snapshot's manifest; do not modify it.
func (s *Snapshot) Manifest() *format.Manifest { return s.m }

// Version returns the snapshot's version.
func (s *Snapshot) Version() uint64 { return s.m.Version }

// Bucket returns the bucket the table lives in.
func (s *Snapshot) Bucket() blob.Bucket { return s.b }

// LatestVersion returns the newest version number with one LIST page of
// one key, or ErrNotFound when there is no table.
func LatestVersion(ctx context.Context, b blob.Bucket) (uint64, error) {
	page, err := b.ListPage(ctx, format.VersionsDir, "", 1)
	if err != nil {
		return 0, err
	}
	for _, o := range page.Objects {
		if v, ok := format.ParseManifestKey(o.Key); ok {
			return v, nil
		}
	}
	if len(page.Objects) > 0 {
		// A stray object sorted first; fall back to a full listing.
		for o, err := range blob.List(ctx, b, format.VersionsDir, 0) {
			if err != nil {
				return 0, err
			}
			if v, ok := format.ParseManifestKey(o.Key); ok {
				return v, nil
			}
		}
	}
	return 0, format.ErrNotFound
}

// ReadLatest reads the newest manifest.
func ReadLatest(ctx context.Context, b blob.Bucket) (*format.Manifest, error) {
	v, err := LatestVersion(ctx, b)
	if err != nil {
		return nil, err
	}
	return ReadManifest(ctx, b, v)
}

// Newest returns the newest manifest from m on: the versions after m
// are looked for by name (they are created in order, without gaps), so
// that a listing that lags cannot hide one. It returns m when none is.
func Newest(ctx context.Context, b blob.Bucket, m *format.Manifest) (*format.Manifest, error) {
	v, err := NewestFrom(ctx, b, m.Version)
	if err != nil {
		return nil, err
	}
	if v == m.Version {
		return m, nil
	}
	return ReadManifest(ctx, b, v)
}

// NewestFrom returns the newest version from v on, looking for the ones
// after v by name (one request each, and one more).
func NewestFrom(ctx context.Context, b blob.Bucket, v uint64) (uint64, error) {
	for {
		_, err := b.Attributes(ctx, format.ManifestKey(v+1))
		if errors.Is(err, blob.ErrNotFound) {
			return v, nil
		}
		if err != nil {
			return 0, err
		}
		v++
	}
}

// ReadManifest reads and decodes version v's manifest.
func ReadManifest(ctx context.Context, b blob.Bucket, v uint64) (*format.Manifest, error) {
	key, data, err := getManifest(ctx, b, v)
	if err != nil {
		return nil, err
	}
	return format.DecodeManifest(key, data)
}

func getManifest(ctx context.Context, b blob.Bucket, v uint64) (string, []byte, error) {
	key := format.ManifestKey(v)
	data, err := b.Get(ctx, key)
	if errors.Is(err, blob.ErrNotFound) {
		return key, nil, fmt.Errorf("table: version %d: %w", v, format.ErrVersionNotFound)
	}
	return key, data, err
}

// ReadTransaction reads only the transaction that made version v.
func ReadTransaction(ctx context.Context, b blob.Bucket, v uint64) (*format.Transaction, error) {
	key, data, err := getManifest(ctx, b, v)
	if err != nil {
		return nil, err
	}
	return format.DecodeTransaction(key, data)
}

// VersionInfo is one entry of the version history.
type VersionInfo struct {
	Version uint64      `json:"version"`
	Time    time.Time   `json:"time"`           // when the manifest was written (the store's clock)
	Kind    format.Kind `json:"kind,omitempty"` // set only when Versions was asked to read manifests
	Rows    int64       `json:"rows,omitempty"` // likewise
}

// Versions lists the versions, newest first, from LIST alone; with
// withDetail it also reads each manifest for its operation and row count
// (one GET per version), at most limit versions (0: all).
func Versions(ctx context.Context, b blob.Bucket, limit int, withDetail bool) ([]VersionInfo, error) {
	var out []VersionInfo
	for o, err := range blob.List(ctx, b, format.VersionsDir, 0) {
		if err != nil {
			return nil, err
		}
		v, ok := format.ParseManifestKey(o.Key)
		if !ok {
			continue
		}
		vi := VersionInfo{Version: v, Time: o.ModTime}
		if withDetail {
			m, err := ReadManifest(ctx, b, v)
			if err != nil {
				return nil, err
			}
			vi.Kind, vi.Rows, vi.Time = m.Transaction.Kind, m.Rows(), m.Timestamp
		}
		out = append(out, vi)
		if limit > 0 && len(out) == limit {
			break
		}
	}
	if len(out) == 0 {
		return nil, format.ErrNotFound
	}
	return out, nil
}

// Tag names a version.
type Tag struct {
	Name    string    `json:"name"`
	Version uint64    `json:"version"`
	Created time.Time `json:"created"`
}

func checkTagName(name string) error { return checkRefName("tag", name) }

// checkRefName checks the name of a tag or a consumer.
func checkRefName(kind, name string) error {
	if name == "" || len(name) > 128 {
		return fmt.Errorf("table: %s name must be 1 to 128 characters: %w", kind, format.ErrBadName)
	}
	for _, r := range name {
		if !(r == '-' || r == '_' || r == '.' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') {
			return fmt.Errorf("table: %s name %q: use letters, digits, '-', '_' and '.': %w", kind, name, format.ErrBadName)
		}
	}
	if name == "." || name == ".." {
		return fmt.Errorf("table: %s name %q is reserved: %w", kind, name, format.ErrBadName)
	}
	return nil
}

// CreateTag names version v; an existing tag of that name is an error
// (ErrTagExists): tags are never moved.
func CreateTag(ctx context.Context, b blob.Bucket, name string, v uint64) error {
	if err := checkTagName(name); err != nil {
		return err
	}
	if _, err := ReadManifest(ctx, b, v); err != nil {
		return err
	}
	data, _ := json.Marshal(Tag{Name: name, Version: v, Created: time.Now().UTC()})
	err := b.PutIfAbsent(ctx, format.TagKey(name), data)
	if errors.Is(err, blob.ErrExists) {
		return fmt.Errorf("table: tag %q: %w", name, format.ErrTagExists)
	}
	if err != nil {
		return err
	}
	// A collection that listed the tags before this one landed may delete
	// v. It creates its boundary first and lists the tags again after, so:
	// if no boundary covers v now, any collection that would delete v sees
	// the tag. If one does, v may be on its way out, unless another tag
	// kept it already.
	boundary, err := GCBoundary(ctx, b)
	if err != nil || v > boundary {
		return err
	}
	tags, err := Tags(ctx, b)
	if err != nil {
		return err
	}
	for _, t := range tags {
		if t.Version == v && t.Name != name {
			return nil
		}
	}
	_ = b.Delete(ctx, format.TagKey(name))
	return fmt.Errorf("table: tag %q: version %d is at or below the garbage collector's boundary (v%d) and may be deleted: %w", name, v, boundary, format.ErrVersionNotFound)
}

// DeleteTag removes a tag (ErrTagNotFound when there is none). Its
// version is then kept only as long as the retention keeps it.
func DeleteTag(ctx context.Context, b blob.Bucket, name string) error {
	if err := checkTagName(name); err != nil {
		return err
	}
	err := b.Delete(ctx, format.TagKey(name))
	if errors.Is(err, blob.ErrNotFound) {
		return fmt.Errorf("table: tag %q: %w", name, format.ErrTagNotFound)
	}
	return err
}

// GCBoundary returns the newest garbage collection boundary (0: none):
// versions at or below it may have been deleted and must never be created
// again. One LIST of one key.
func GCBoundary(ctx context.Context, b blob.Bucket) (uint64, error) {
	page, err := b.ListPage(ctx, format.GCBoundaryDir, "", 1)
	if err != nil {
		return 0, err
	}
	for _, o := range page.Objects {
		if v, ok := format.ParseGCBoundaryKey(o.Key); ok {
			return v, nil
		}
	}
	return 0, nil
}

// CoveredAfter tells whether the manifest of version v was created no
// earlier than a GC boundary at or above v: a ghost, which a writer
// stalled past a collection created again where the collection had
// deleted v (it deletes it, or the next collection
// does). A version kept below a boundary (tagged, or the Iceberg view's)
// was created before it. Both times are the store's. One LIST of the
// boundaries, newest first, and one HEAD when one covers v, unless the
// caller has the manifest's attributes already (ours, else nil). It
// answers why it is a ghost, or "" (also when the manifest is not there).
func CoveredAfter(ctx context.Context, b blob.Bucket, v uint64, ours *blob.Attributes) (string, error) {
	for o, err := range blob.List(ctx, b, format.GCBoundaryDir, 0) {
		if err != nil {
			return "", err
		}
		bv, ok := format.ParseGCBoundaryKey(o.Key)
		if !ok {
			continue
		}
		if bv < v {
			break // boundaries list newest first
		}
		if ours == nil {
			a, err := b.Attributes(ctx, format.ManifestKey(v))
			if errors.Is(err, blob.ErrNotFound) {
				return "", nil
			}
			if err != nil {
				return "", err
			}
			ours = &a
		}
		if !o.ModTime.After(ours.ModTime) {
			return fmt.Sprintf("the GC boundary v%d, which covers it, was created before it", bv), nil
		}
	}
	return "", nil
}

// notAGhost fails with ErrVersionNotFound when version v's manifest is a
// ghost (CoveredAfter): v was collected, and what is there now is not
// what it held.
func notAGhost(ctx context.Context, b blob.Bucket, v uint64) error {
	why, err := CoveredAfter(ctx, b, v, nil)
	if err != nil || why == "" {
		return err
	}
	// A tagged version is no ghost (collections keep it, and no tag is
	// made at or below a boundary): its times were reset by a copy.
	tags, err := Tags(ctx, b)
	if err != nil {
		return err
	}
	if slices.ContainsFunc(tags, func(t Tag) bool { return t.Version == v }) {
		return nil
	}
	return fmt.Errorf("table: version %d was collected (%s; a writer stalled past the collection created it again, and it goes at the next collection): %w", v, why, format.ErrVersionNotFound)
}

// ReadTag reads a tag.
func ReadTag(ctx context.Context, b blob.Bucket, name string) (Tag, error) {
	if err := checkTagName(name); err != nil {
		return Tag{}, err
	}
	data, err := b.Get(ctx, format.TagKey(name))
	if errors.Is(err, blob.ErrNotFound) {
		return Tag{}, fmt.Errorf("table: tag %q: %w", name, format.ErrTagNotFound)
	}
	if err != nil {
		return Tag{}, err
	}
	var t Tag
	if err := json.Unmarshal(data, &t); err != nil || t.Version == 0 {
		return Tag{}, format.Corrupt(format.TagKey(name), "not a tag", err)
	}
	return t, nil
}

// Tags lists every tag.
func Tags(ctx context.Context, b blob.Bucket) ([]Tag, error) {
	var out []Tag
	for o, err := range blob.List(ctx, b, format.TagsDir, 0) {
		if err != nil {
			return nil, err
		}
		name := o.Key[len(format.TagsDir):]
		if len(name) < 6 || name[len(name)-5:] != ".json" {
			continue
		}
		t, err := ReadTag(ctx, b, name[:len(name)-5])
		if err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	return out, nil
}
