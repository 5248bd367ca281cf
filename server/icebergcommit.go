package server

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/iceberg-go"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/engine"
	"github.com/stratadb/strata/internal/ingest"
	"github.com/stratadb/strata/table"
	"github.com/stratadb/strata/table/evolve"
	"github.com/stratadb/strata/table/format"
)

// A commit from an engine (POST /v1/namespaces/{ns}/tables/{table}) is
// taken when its one change is a new snapshot of operation "append" made
// the main branch: the data files that snapshot adds are read (each a
// Parquet file under the table's location, its columns the table's by
// name), and their rows appended to the table in one Strata commit, judged
// by the conflict matrix against every commit since the snapshot the
// engine wrote it on (its assert-ref-snapshot-id): appends and compactions
// since then let it land, a schema change that drops a column it fills or
// a restore answers 409 for the engine to load the table and try again.
// The rows are copied into fragments of the table's own; the engine's
// files are left for garbage collection.
//
// A commit sent again after its answer was lost stores nothing twice: the
// append is named by the Idempotency-Key header when the engine sends
// one, else by the data files it adds (their paths and sizes), so that
// the same files appended again answer the first outcome.

// icebergCommitRequest is the spec's CommitTableRequest.
type icebergCommitRequest struct {
	Requirements []json.RawMessage `json:"requirements"`
	Updates      []json.RawMessage `json:"updates"`
}

type icebergRequirement struct {
	Type       string `json:"type"`
	Ref        string `json:"ref"`
	SnapshotID *int64 `json:"snapshot-id"`
	UUID       string `json:"uuid"`
	FieldID    *int   `json:"last-assigned-field-id"`
	SchemaID   *int   `json:"current-schema-id"`
	PartID     *int   `json:"last-assigned-partition-id"`
	SpecID     *int   `json:"default-spec-id"`
	SortID     *int   `json:"default-sort-order-id"`
}

type icebergUpdate struct {
	Action   string `json:"action"`
	Snapshot *struct {
		SnapshotID   int64             `json:"snapshot-id"`
		ManifestList string            `json:"manifest-list"`
		Summary      map[string]string `json:"summary"`
	} `json:"snapshot"`
	RefName    string `json:"ref-name"`
	Type       string `json:"type"`
	SnapshotID int64  `json:"snapshot-id"`
}

// icebergCommitHold is what an engine's append holds of the server's
// write budget while it copies rows (a row group of a data file at a
// time, into fragments of up to engine.StreamFragmentRows rows).
const icebergCommitHold = 64 << 20

// maxIcebergMetadataBytes bounds a manifest list or manifest an engine's
// commit names: read whole, it must fit in memory.
const maxIcebergMetadataBytes = 64 << 20

// accepted says what a commit may hold, for the refusals.
const accepted = "Strata takes commits whose one change is a snapshot of operation append made the main branch (an engine's append of data files): add-snapshot and set-snapshot-ref of main"

func (s *Server) icebergCommit(w http.ResponseWriter, r *http.Request) error {
	// The token's grant and the table first: 403 or 404 before the body.
	t, err := s.icebergTable(r, Append)
	if err != nil {
		return err
	}
	if err := jsonBody(r); err != nil {
		return err
	}
	var req icebergCommitRequest
	dec := json.NewDecoder(r.Body)
	if err := dec.Decode(&req); err != nil {
		return badRequestOrLimit(err, "the commit")
	}
	if _, err := dec.Token(); err != io.EOF {
		return icebergErrorf(http.StatusBadRequest, icebergBadRequest, "the commit: more follows its JSON object")
	}
	snap, err := appendedSnapshot(req.Updates)
	if err != nil {
		return err
	}
	v, err := s.view(r.Context(), t)
	if err != nil {
		return err
	}
	base, err := checkRequirements(req.Requirements, v.meta)
	if err != nil {
		return err
	}
	files, err := addedFiles(r.Context(), t.b, v.meta.Location, snap.Snapshot.ManifestList, snap.Snapshot.SnapshotID)
	if err != nil {
		return err
	}
	if err := checkSummary(snap.Snapshot.Summary, files); err != nil {
		return err
	}
	if len(files) > 0 {
		release, err := s.budget.write(r.Context(), icebergCommitHold)
		if err != nil {
			return err
		}
		err = s.appendFiles(r.Context(), t, base, files, r.Header.Get("Idempotency-Key"))
		release()
		if err != nil {
			return err
		}
	}
	if v, err = s.view(r.Context(), t); err != nil {
		// The rows are stored: the engine must not take this for a
		// failure and append them again under another name.
		return icebergErrorf(http.StatusInternalServerError, "CommitStateUnknownException",
			"the append was committed, but the table's metadata could not be written to answer it (%v); load the table to see it", err)
	}
	w.Header().Set("ETag", v.etag)
	writeRawMetadata(w, v, "")
	return nil
}

// appendedSnapshot finds the one snapshot the updates add, refusing any
// other change.
func appendedSnapshot(raw []json.RawMessage) (*icebergUpdate, error) {
	var snap *icebergUpdate
	var ref *icebergUpdate
	for _, m := range raw {
		var u icebergUpdate
		if err := json.Unmarshal(m, &u); err != nil {
			return nil, icebergErrorf(http.StatusBadRequest, icebergBadRequest, "an update of the commit: %s", jsonWords(err))
		}
		switch {
		case u.Action == "add-snapshot" && u.Snapshot != nil && snap == nil:
			if op := u.Snapshot.Summary["operation"]; op != "append" {
				return nil, icebergErrorf(http.StatusNotAcceptable, icebergUnsupported, "the snapshot's operation is %q: %s", op, accepted)
			}
			snap = &u
		case u.Action == "set-snapshot-ref" && u.RefName == "main" && ref == nil:
			ref = &u
		default:
			what := u.Action
			if u.Action == "set-snapshot-ref" {
				what += " of " + u.RefName
			}
			return nil, icebergErrorf(http.StatusNotAcceptable, icebergUnsupported, "the commit's update %q is refused: %s", what, accepted)
		}
	}
	if snap == nil {
		return nil, icebergErrorf(http.StatusNotAcceptable, icebergUnsupported, "the commit adds no snapshot: %s", accepted)
	}
	if ref == nil || ref.SnapshotID != snap.Snapshot.SnapshotID || ref.Type != "" && ref.Type != "branch" {
		return nil, icebergErrorf(http.StatusNotAcceptable, icebergUnsupported, "the commit does not make its snapshot the main branch: %s", accepted)
	}
	return snap, nil
}

// checkRequirements checks the commit's requirements against the view's
// current metadata and returns the version the engine wrote on (its
// assert-ref-snapshot-id of main; 0: none asserted, the latest).
func checkRequirements(raw []json.RawMessage, m viewMeta) (uint64, error) {
	var base uint64
	failed := func(format string, args ...any) error {
		return icebergErrorf(http.StatusConflict, icebergCommitFailed, "requirement failed: "+format+"; load the table again and retry", args...)
	}
	eq := func(what string, want *int, have int) error {
		if want == nil || *want != have {
			return failed("%s is %d, not %v", what, have, deref(want))
		}
		return nil
	}
	for _, b := range raw {
		var q icebergRequirement
		if err := json.Unmarshal(b, &q); err != nil {
			return 0, icebergErrorf(http.StatusBadRequest, icebergBadRequest, "a requirement of the commit: %s", jsonWords(err))
		}
		var err error
		switch q.Type {
		case "assert-create":
			err = failed("the table exists")
		case "assert-table-uuid":
			if !strings.EqualFold(q.UUID, m.TableUUID) {
				err = failed("the table's uuid is %s, not %s", m.TableUUID, q.UUID)
			}
		case "assert-ref-snapshot-id":
			if q.Ref != "main" {
				return 0, icebergErrorf(http.StatusNotAcceptable, icebergUnsupported, "a requirement on ref %q: %s", q.Ref, accepted)
			}
			if q.SnapshotID == nil || *q.SnapshotID <= 0 {
				err = failed("the table has a main branch")
			} else {
				base = uint64(*q.SnapshotID)
			}
		case "assert-last-assigned-field-id":
			err = eq("the last column id", q.FieldID, m.LastColumnID)
		case "assert-current-schema-id":
			err = eq("the current schema id", q.SchemaID, m.CurrentSchemaID)
		case "assert-last-assigned-partition-id":
			if m.LastPartitionID != nil {
				err = eq("the last partition id", q.PartID, *m.LastPartitionID)
			}
		case "assert-default-spec-id":
			err = eq("the default spec id", q.SpecID, m.DefaultSpecID)
		case "assert-default-sort-order-id":
			err = eq("the default sort order id", q.SortID, m.DefaultSortOrderID)
		default:
			return 0, icebergErrorf(http.StatusBadRequest, icebergBadRequest, "unknown requirement %q", q.Type)
		}
		if err != nil {
			return 0, err
		}
	}
	return base, nil
}

func deref(p *int) any {
	if p == nil {
		return "null"
	}
	return *p
}

// addedFile is a data file an engine's snapshot adds.
type addedFile struct {
	key  string // under the table's prefix
	path string // as the engine named it
	size int64
	rows int64
}

// addedFiles reads the snapshot's manifest list and the manifests it
// added, and returns the data files they add; a delete file, a file
// removed, a file not Parquet or not under the table's location is
// refused.
func addedFiles(ctx context.Context, b blob.Bucket, loc, list string, id int64) ([]addedFile, error) {
	refuse := func(format string, args ...any) error {
		return icebergErrorf(http.StatusBadRequest, icebergBadRequest, format, args...)
	}
	key, err := keyUnder(loc, list)
	if err != nil {
		return nil, refuse("the snapshot's manifest list: %v", err)
	}
	data, err := getMetadata(ctx, b, key, list)
	if err != nil {
		return nil, err
	}
	manifests, err := iceberg.ReadManifestList(bytes.NewReader(data))
	if err != nil {
		return nil, refuse("the snapshot's manifest list %s is not Iceberg Avro: %v", list, err)
	}
	var files []addedFile
	seen := map[string]bool{}
	for _, mf := range manifests {
		if mf.SnapshotID() != id {
			continue // carried from the snapshots before
		}
		if mf.ManifestContent() != iceberg.ManifestContentData {
			return nil, icebergErrorf(http.StatusNotAcceptable, icebergUnsupported, "the snapshot adds delete files (manifest %s): %s", mf.FilePath(), accepted)
		}
		mkey, err := keyUnder(loc, mf.FilePath())
		if err != nil {
			return nil, refuse("manifest %s: %v", mf.FilePath(), err)
		}
		raw, err := getMetadata(ctx, b, mkey, mf.FilePath())
		if err != nil {
			return nil, err
		}
		entries, err := iceberg.ReadManifest(mf, bytes.NewReader(raw), false)
		if err != nil {
			return nil, refuse("manifest %s is not Iceberg Avro: %v", mf.FilePath(), err)
		}
		for _, e := range entries {
			switch {
			case e.Status() == iceberg.EntryStatusDELETED:
				return nil, icebergErrorf(http.StatusNotAcceptable, icebergUnsupported, "the snapshot removes %s: %s", e.DataFile().FilePath(), accepted)
			case e.Status() != iceberg.EntryStatusADDED || e.SnapshotID() != id:
				continue
			}
			df := e.DataFile()
			if df.FileFormat() != iceberg.ParquetFile {
				return nil, refuse("data file %s is %s: Strata takes Parquet", df.FilePath(), df.FileFormat())
			}
			k, err := keyUnder(loc, df.FilePath())
			if err != nil {
				return nil, refuse("data file %s: %v", df.FilePath(), err)
			}
			if !strings.HasPrefix(k, engine.IcebergEnginesDir) {
				return nil, refuse("data file %s is not under %s/%s, where the table's Iceberg metadata tells engines to write (write.data.path): the table's own files and other tables' are not appended", df.FilePath(), strings.TrimSuffix(loc, "/"), engine.IcebergEnginesDir)
			}
			if seen[k] {
				return nil, refuse("the snapshot adds data file %s twice", df.FilePath())
			}
			seen[k] = true
			files = append(files, addedFile{key: k, path: df.FilePath(), size: df.FileSizeBytes(), rows: df.Count()})
		}
	}
	return files, nil
}

// checkSummary refuses a snapshot whose summary counts other data files
// or rows than its manifests add (a count it leaves out is not checked).
func checkSummary(summary map[string]string, files []addedFile) error {
	var rows int64
	for _, f := range files {
		rows += f.rows
	}
	for _, c := range []struct {
		key  string
		have int64
	}{{"added-data-files", int64(len(files))}, {"added-records", rows}} {
		if n, ok := summary[c.key]; ok && n != strconv.FormatInt(c.have, 10) {
			return icebergErrorf(http.StatusBadRequest, icebergBadRequest, "the snapshot's summary says %s %s; its manifests add %d", c.key, n, c.have)
		}
	}
	return nil
}

// getMetadata reads a manifest list or manifest an engine's commit names,
// refusing one that is not there or over maxIcebergMetadataBytes.
func getMetadata(ctx context.Context, b blob.Bucket, key, path string) ([]byte, error) {
	a, err := b.Attributes(ctx, key)
	if errors.Is(err, blob.ErrNotFound) {
		return nil, icebergErrorf(http.StatusBadRequest, icebergBadRequest, "%s does not exist", path)
	} else if err != nil {
		return nil, err
	}
	if a.Size > maxIcebergMetadataBytes {
		return nil, icebergErrorf(http.StatusBadRequest, icebergBadRequest, "%s is %d bytes: a manifest list or manifest of at most %d is read", path, a.Size, maxIcebergMetadataBytes)
	}
	data, err := b.Get(ctx, key)
	if errors.Is(err, blob.ErrNotFound) {
		return nil, icebergErrorf(http.StatusBadRequest, icebergBadRequest, "%s does not exist", path)
	}
	return data, err
}

// keyUnder is the key of a file the engine names, which must lie under
// the table's location and not in a folder above it.
func keyUnder(loc, path string) (string, error) {
	key, err := engine.IcebergObjectKey(strings.TrimSuffix(loc, "/"), path)
	if err != nil {
		return "", err
	}
	for seg := range strings.SplitSeq(key, "/") {
		if seg == "" || seg == "." || seg == ".." {
			return "", fmt.Errorf("%s names an empty, . or .. segment under the table's location", path)
		}
	}
	return key, nil
}

// appendFiles appends the rows of the engine's files in one commit read
// at version base, named by key (an Idempotency-Key) or by the files.
func (s *Server) appendFiles(ctx context.Context, t *tableState, base uint64, files []addedFile, key string) error {
	if base == 0 {
		v, err := table.LatestVersion(ctx, t.b)
		if err != nil {
			return err
		}
		base = v
	}
	m, err := table.ReadManifest(ctx, t.b, base)
	if errors.Is(err, format.ErrVersionNotFound) {
		return icebergErrorf(http.StatusConflict, icebergCommitFailed, "the snapshot the commit was written on (%d) is no longer kept; load the table again and retry", base)
	} else if err != nil {
		return err
	}
	ack, err := t.db.AppendStream(ctx, engine.StreamOptions{Key: filesKey(files, key), ReadVersion: base}, m.Schema(), s.filesRows(ctx, t.b, files, m.Schema()))
	var ie *evolve.InputError
	switch {
	case errors.Is(err, engine.ErrConflict):
		return icebergErrorf(http.StatusConflict, icebergCommitFailed, "%v; load the table again and retry", err)
	case errors.As(err, &ie):
		return icebergErrorf(http.StatusBadRequest, icebergBadRequest, "%v", err)
	case err != nil:
		return err
	}
	s.opts.Log.Info("iceberg append", "table", t.name, "files", len(files), "rows", ack.Rows, "version", ack.Version, "duplicate", ack.Duplicate)
	return nil
}

// filesKey names an engine's append: by its Idempotency-Key, or by the
// paths and sizes of the files it adds, in order.
func filesKey(files []addedFile, key string) *format.Idempotency {
	h := sha256.New()
	paths := make([]string, len(files))
	for i, f := range files {
		paths[i] = fmt.Sprintf("%s\x00%d", f.path, f.size)
	}
	slices.Sort(paths)
	for _, p := range paths {
		io.WriteString(h, p+"\n")
	}
	sum := h.Sum(nil)
	producer := "iceberg-files:" + fmt.Sprintf("%x", sum[:16])
	if key != "" {
		producer = "iceberg-key:" + key
	}
	return &format.Idempotency{Producer: producer, Digest: binary.BigEndian.Uint64(sum[:8])}
}

// filesRows reads the files' rows, one row group at a time with ranged
// requests (blob.ReaderAt), conformed to schema by column name; a file
// whose rows are not the count its manifest says is refused.
func (s *Server) filesRows(ctx context.Context, b blob.Bucket, files []addedFile, schema *arrow.Schema) iter.Seq2[arrow.RecordBatch, error] {
	return func(yield func(arrow.RecordBatch, error) bool) {
		for _, f := range files {
			src, err := blob.NewReaderAt(ctx, b, f.key)
			if errors.Is(err, blob.ErrNotFound) {
				err = &evolve.InputError{Row: -1, Reason: "the file does not exist"}
			}
			if err != nil {
				yield(nil, fmt.Errorf("data file %s: %w", f.path, err))
				return
			}
			var n int64
			for rec, err := range ingest.Parquet(src, f.path, schema, ingest.Options{}) {
				if err != nil {
					yield(nil, err)
					return
				}
				n += rec.NumRows()
				if !yield(rec, nil) {
					return
				}
			}
			if n != f.rows {
				yield(nil, &evolve.InputError{Row: -1, Reason: fmt.Sprintf("data file %s holds %d rows; its manifest says %d", f.path, n, f.rows)})
				return
			}
		}
	}
}
