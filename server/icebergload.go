package server

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"net/http"
	"strings"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/engine"
	"github.com/stratadb/strata/table"
	"github.com/stratadb/strata/table/format"
)

// IcebergExport brings the Iceberg view of the table at url (b, opened
// from it) up to date: the versions gc keeps, as engine/iceberg.ExportKept
// writes them. A program that links the Iceberg writer passes that; strata
// serve, which does not, runs strata-iceberg.
type IcebergExport func(ctx context.Context, b blob.Bucket, url string, gc engine.GCPolicy) error

// icebergView is what the server holds of a table's view: the newest
// metadata as it last read it, and what the table was then (its newest
// version and tags), so that a load of a table that has not moved
// answers from memory after two listings.
type icebergView struct {
	// turn is held by the one request that reads or exports the view of
	// the table; the others wait for it, each no longer than its own
	// context allows (made with the table's state: a buffer of one).
	turn  chan struct{}
	state uint64          // the table's newest manifest and tags when read (stateOf)
	hint  blob.Attributes // the view's hint after it was read (hintOf)
	cur   viewRead
}

// take waits for the view's turn; release gives it back.
func (v *icebergView) take(ctx context.Context) (release func(), err error) {
	select {
	case v.turn <- struct{}{}:
		return func() { <-v.turn }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// maxExports bounds the exports a server runs at once, over all tables:
// each is a process of its own, with the memory a table's history takes.
const maxExports = 2

// viewRead is the newest metadata as read.
type viewRead struct {
	raw      []byte
	location string // the metadata's location
	etag     string
	meta     viewMeta
}

// viewMeta is what the catalog reads of the view's metadata.
type viewMeta struct {
	Location           string `json:"location"`
	TableUUID          string `json:"table-uuid"`
	CurrentSchemaID    int    `json:"current-schema-id"`
	LastColumnID       int    `json:"last-column-id"`
	DefaultSpecID      int    `json:"default-spec-id"`
	LastPartitionID    *int   `json:"last-partition-id"`
	DefaultSortOrderID int    `json:"default-sort-order-id"`
}

// stateOf digests what the view follows of a table: its newest version's
// manifest (its key, size and time, so that a table dropped and made again
// up to the same version is not taken for the one before) and its tags (a
// LIST each).
func stateOf(ctx context.Context, b blob.Bucket) (uint64, error) {
	page, err := b.ListPage(ctx, format.VersionsDir, "", 1)
	if err != nil {
		return 0, err
	}
	if len(page.Objects) == 0 {
		return 0, format.ErrNotFound
	}
	newest := page.Objects[0]
	if _, ok := format.ParseManifestKey(newest.Key); !ok {
		// Not a manifest listed first: the newest by name, as a table's
		// readers find it.
		v, err := table.LatestVersion(ctx, b)
		if err != nil {
			return 0, err
		}
		a, err := b.Attributes(ctx, format.ManifestKey(v))
		if err != nil {
			return 0, err
		}
		newest = blob.ObjectInfo{Key: format.ManifestKey(v), Size: a.Size, ModTime: a.ModTime}
	}
	tags, err := table.Tags(ctx, b)
	if err != nil {
		return 0, err
	}
	h := fnv.New64a()
	fmt.Fprintf(h, "%s\x00%d\x00%d", newest.Key, newest.Size, newest.ModTime.UnixNano())
	for _, t := range tags {
		fmt.Fprintf(h, "\x00%s=%d", t.Name, t.Version)
	}
	return h.Sum64(), nil
}

// hintOf stamps the view's hint, which every export that writes rewrites
// (the Job's, strata export iceberg's) and which goes with _iceberg/: what
// another process did to the view shows here (a HEAD).
func hintOf(ctx context.Context, b blob.Bucket) (blob.Attributes, error) {
	a, err := b.Attributes(ctx, engine.IcebergHintKey)
	if errors.Is(err, blob.ErrNotFound) {
		return blob.Attributes{}, nil
	}
	return a, err
}

// view returns the table's view as of now: from memory when the table has
// not moved since it was read, else read anew, and exported first when the
// newest metadata does not describe the table's newest version (or the
// server has not read it since it started: an export that finds nothing
// to change writes nothing).
func (s *Server) view(ctx context.Context, t *tableState) (viewRead, error) {
	v := &t.view
	release, err := v.take(ctx)
	if err != nil {
		return viewRead{}, err
	}
	defer release()
	// What follows goes on when the client leaves: an export cut short
	// would be started again from the view before it, by the next load.
	ctx = context.WithoutCancel(ctx)
	state, err := stateOf(ctx, t.b)
	if err != nil {
		return viewRead{}, err
	}
	hint, err := hintOf(ctx, t.b)
	if err != nil {
		return viewRead{}, err
	}
	if v.cur.raw != nil && v.state == state && v.hint == hint {
		return v.cur, nil
	}
	if s.opts.IcebergExport == nil {
		return viewRead{}, icebergErrorf(http.StatusServiceUnavailable, icebergUnavailable,
			"table %q: this server cannot write the table's Iceberg view (it was started without the Iceberg writer: strata serve runs strata-iceberg, found beside strata or on PATH)", t.name)
	}
	s.exports <- struct{}{}
	err = s.opts.IcebergExport(ctx, t.b, blob.JoinURL(s.opts.Bucket, t.name), t.db.GCPolicy())
	<-s.exports
	if err != nil {
		return viewRead{}, fmt.Errorf("table %q: writing its Iceberg view: %w", t.name, err)
	}
	// The hint as the export left it: the table as it was before the
	// export, the view as it is after.
	if hint, err = hintOf(ctx, t.b); err != nil {
		return viewRead{}, err
	}
	m, err := engine.NewestIcebergMetadata(ctx, t.b)
	if err != nil {
		return viewRead{}, err
	}
	if m.N == 0 {
		return viewRead{}, fmt.Errorf("table %q: the Iceberg view's export wrote no metadata", t.name)
	}
	var meta viewMeta
	if err := json.Unmarshal(m.Raw, &meta); err != nil {
		return viewRead{}, fmt.Errorf("table %q: %s is not Iceberg metadata (delete _iceberg/ to start the view afresh): %w", t.name, m.Key, err)
	}
	sum := sha256.Sum256(m.Raw)
	v.state, v.hint = state, hint
	v.cur = viewRead{raw: m.Raw, meta: meta, etag: `"` + hex.EncodeToString(sum[:16]) + `"`,
		location: strings.TrimSuffix(meta.Location, "/") + "/" + m.Key}
	return v.cur, nil
}

// icebergLoad answers GET and HEAD /v1/namespaces/{ns}/tables/{table}:
// the table's current metadata, a snapshot per version garbage collection
// keeps, with an ETag; 304 for an If-None-Match that names it.
func (s *Server) icebergLoad(w http.ResponseWriter, r *http.Request) error {
	t, err := s.icebergTable(r, Read)
	if err != nil {
		return err
	}
	if r.Method == http.MethodHead {
		if _, err := table.LatestVersion(r.Context(), t.b); err != nil {
			return err // a table dropped by another process since this server opened it
		}
		w.WriteHeader(http.StatusNoContent)
		return nil
	}
	v, err := s.view(r.Context(), t)
	if err != nil {
		return err
	}
	w.Header().Set("ETag", v.etag)
	if matchesETag(r.Header.Get("If-None-Match"), v.etag) {
		w.WriteHeader(http.StatusNotModified)
		return nil
	}
	writeRawMetadata(w, v, `"config":{}`)
	return nil
}

// writeRawMetadata answers the view's metadata location and metadata (and
// the fields in more, JSON members), the metadata as it was read: not
// decoded and encoded again, which for a history of 10,000 versions costs
// tens of milliseconds a load.
func writeRawMetadata(w http.ResponseWriter, v viewRead, more string) {
	loc, _ := json.Marshal(v.location)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	for _, part := range [][]byte{[]byte(`{"metadata-location":`), loc, []byte(`,"metadata":`), v.raw} {
		if _, err := w.Write(part); err != nil {
			return
		}
	}
	if more != "" {
		_, _ = io.WriteString(w, ","+more)
	}
	_, _ = io.WriteString(w, "}\n")
}

// matchesETag says whether an If-None-Match header names etag (or is *).
func matchesETag(header, etag string) bool {
	for _, e := range strings.Split(header, ",") {
		e = strings.TrimSpace(e)
		if e == "*" || strings.TrimPrefix(e, "W/") == etag {
			return true
		}
	}
	return false
}
