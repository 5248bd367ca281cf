package lakehouse_test

// What package lakehouse promises (its doc comment, and docs/format.md on
// _iceberg/), and the test that pins each:
//
//   - Each Strata version becomes one snapshot whose id and sequence number
//     are the version, whose timestamp is the version's, and whose summary
//     carries the version, its operation and its commit id; a data file's
//     sequence number is the version that added it (the oldest snapshot
//     described, for one added before):
//     TestASnapshotsIDAndSequenceNumberAreItsVersion;
//     the timestamp raised to the previous one when clocks are skewed:
//     TestOldVersionsAndSkewedClocksExport.
//   - Data files are the table's fragments in place, and deletion vectors
//     become position-delete files, one per vector:
//     TestASnapshotsFilesAreItsFragmentsAndVectors; read back the same:
//     TestIcebergReadersSeeWhatStrataSees.
//   - Readers map columns by name, and every fragment reads the same way;
//     field ids the fragments carry are the view's:
//     TestSchemaChangesKeepOlderSnapshotsReadable,
//     TestFieldIDsOfAWideTableFollowTheirColumns,
//     TestFieldIDsTheFragmentsCarryAreTheViewsIDs.
//   - Tags become tag refs; the main branch is the newest version
//     described: TestIcebergReadersSeeWhatStrataSees.
//   - Export never modifies the table, writes only under _iceberg/, and
//     rewrites no object but the version hint:
//     TestAnExportWritesOnlyTheViewAndRewritesOnlyTheHint.
//   - Snapshots describe exactly the versions garbage collection keeps, and
//     garbage collection keeps every version the view describes:
//     TestIcebergReadersSeeWhatStrataSees,
//     TestAnExportRacingACollectionLeavesOutWhatItMayDelete (and, in
//     package compactor, TestGCKeepsEveryVersionTheIcebergViewNames).
//   - Of two concurrent exports one wins, the other reads the new view and
//     tries again: TestConcurrentExportsLeaveOneWholeView; an export cut
//     short is finished by the next:
//     TestAnExportCutShortAnywhereIsFinishedByTheNext,
//     TestAnExportLosingAnyResponseIsCompletedByTheNext,
//     TestAnExportRecoversFromAForgetfulStore.
//   - An export costs requests in proportion to what changed:
//     TestIcebergReadersSeeWhatStrataSees (at most 16 requests after one
//     commit); its work per version grows with the columns, not their
//     square: TestAWideTableExportsEveryColumn.
//   - A type Iceberg cannot represent exactly is refused with
//     layout.ErrUnsupported naming the column: TestTypesIcebergCannotHoldAreRefused.
//   - A location must be an absolute URI: TestALocationMustBeAnAbsoluteURI,
//     TestLocationOf.

import (
	"maps"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	iceberg "github.com/apache/iceberg-go"
	iceio "github.com/apache/iceberg-go/io"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/blob/fault"
	"github.com/stratadb/strata/lakehouse"
	"github.com/stratadb/strata/lakehouse/layout"
	"github.com/stratadb/strata/table"
	"github.com/stratadb/strata/table/format"
)

// exported builds the history of TestIcebergReadersSeeWhatStrataSees in a
// folder and exports it: the bucket, the store, and the export's result.
func exported(t *testing.T) (blob.Bucket, store, lakehouse.Result) {
	t.Helper()
	st := store{url: filepath.Join(t.TempDir(), "t")}
	b := open(t, st.url)
	history(t, b)
	loc, err := layout.LocationOf(st.url)
	if err != nil {
		t.Fatal(err)
	}
	res, err := lakehouse.Export(ctx, b, &lakehouse.Options{Location: loc, KeepVersions: 100}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return b, st, res
}

// A snapshot is its version: id, sequence number and the summary's
// strata.version are the version number, its time is the version's, its
// summary names the version's operation and commit id, and the metadata's
// last sequence number is the newest version; as of a snapshot's time,
// the version an engine reads (the newest snapshot timed at or before it)
// is the one strata --as-of reads. Each data or delete file's
// data sequence number is the version that added it (or the oldest
// snapshot, for one added before the view begins): an engine that compares
// sequence numbers — position deletes apply to data files of a sequence
// number at most theirs — or matches them with another writer's, sees
// Strata's own order.
func TestASnapshotsIDAndSequenceNumberAreItsVersion(t *testing.T) {
	b, st, res := exported(t)
	meta := readMeta(t, st, res.MetadataLocation)
	if got := meta.LastSequenceNumber(); got != int64(res.Current) {
		t.Fatalf("last-sequence-number is %d, the newest version described is %d", got, res.Current)
	}
	if len(meta.Snapshots()) != len(res.Snapshots) || len(res.Snapshots) < 10 {
		t.Fatalf("the view holds %d snapshots, the export describes %v", len(meta.Snapshots()), res.Snapshots)
	}
	oldest := res.Snapshots[0]
	added := addedAt(t, b, res.Current)
	fio := viewFS(t, st, res.MetadataLocation)
	for _, v := range res.Snapshots {
		s := meta.SnapshotByID(int64(v))
		if s == nil {
			t.Fatalf("no snapshot has id %d, the version", v)
		}
		m, err := table.ReadManifest(ctx, b, v)
		if err != nil {
			t.Fatal(err)
		}
		if s.SequenceNumber != int64(v) {
			t.Fatalf("the snapshot of version %d has sequence number %d", v, s.SequenceNumber)
		}
		if s.TimestampMs != m.Timestamp.UnixMilli() {
			t.Fatalf("the snapshot of version %d is timed %d, the version %d", v, s.TimestampMs, m.Timestamp.UnixMilli())
		}
		// FOR TIMESTAMP AS OF that time reads the newest snapshot timed at
		// or before it; strata --as-of reads the same version.
		engine := uint64(0)
		for _, o := range meta.Snapshots() {
			if o.TimestampMs <= s.TimestampMs {
				engine = max(engine, uint64(o.SnapshotID))
			}
		}
		if at, err := table.VersionAsOf(ctx, b, time.UnixMilli(s.TimestampMs)); err != nil || at.Version != engine {
			t.Fatalf("as of the snapshot of version %d's time, an engine reads version %d, strata %v (%v)", v, engine, at, err)
		}
		props := s.Summary.Properties
		if props[lakehouse.PropVersion] != strconv.FormatUint(v, 10) || props[lakehouse.PropKind] != string(m.Transaction.Kind) ||
			props[lakehouse.PropCommitID] != m.Transaction.CommitID || m.Transaction.CommitID == "" {
			t.Fatalf("the snapshot of version %d (%s, commit %s) has the summary %v", v, m.Transaction.Kind, m.Transaction.CommitID, props)
		}
		mfs, err := s.Manifests(fio)
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.SequenceNum() > int64(v) || mf.SequenceNum() < int64(oldest) {
				t.Fatalf("snapshot %d lists manifest %s of sequence number %d", v, mf.FilePath(), mf.SequenceNum())
			}
			for e, err := range mf.Entries(fio, true) {
				if err != nil {
					t.Fatal(err)
				}
				key := strings.TrimPrefix(e.DataFile().FilePath(), loc(t, st)+"/")
				want := max(added[key], oldest)
				if added[key] == 0 {
					t.Fatalf("snapshot %d names %s, which no version added", v, key)
				}
				if e.SequenceNum() != int64(want) {
					t.Fatalf("snapshot %d: %s, added by version %d, has data sequence number %d", v, key, added[key], e.SequenceNum())
				}
			}
		}
	}
}

// viewFS is how iceberg-go reaches the objects of the view at location.
func viewFS(t *testing.T, st store, location string) iceio.IO {
	t.Helper()
	fio, err := iceio.LoadFSFunc(st.props, location)(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return fio
}

func loc(t *testing.T, st store) string {
	t.Helper()
	l, err := layout.LocationOf(st.url)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// addedAt maps each fragment's key, and the delete file of each deletion
// vector, to the first version up to newest that holds it.
func addedAt(t *testing.T, b blob.Bucket, newest uint64) map[string]uint64 {
	t.Helper()
	out := map[string]uint64{}
	for v := uint64(1); v <= newest; v++ {
		m, err := table.ReadManifest(ctx, b, v)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range m.Fragments {
			if out[f.Key] == 0 {
				out[f.Key] = v
			}
			if d := f.Deletion; d != nil && out[layout.DeleteFileKey(d.Key)] == 0 {
				out[layout.DeleteFileKey(d.Key)] = v
			}
		}
	}
	return out
}

// A snapshot's data files are its version's fragments, in place, and its
// delete files are the version's deletion vectors, one file each.
func TestASnapshotsFilesAreItsFragmentsAndVectors(t *testing.T) {
	b, st, res := exported(t)
	meta := readMeta(t, st, res.MetadataLocation)
	fio := viewFS(t, st, res.MetadataLocation)
	prefix := loc(t, st) + "/"
	for _, v := range res.Snapshots {
		m, err := table.ReadManifest(ctx, b, v)
		if err != nil {
			t.Fatal(err)
		}
		var wantData, wantDels []string
		for _, f := range m.Fragments {
			wantData = append(wantData, prefix+f.Key)
			if f.Deletion != nil {
				wantDels = append(wantDels, prefix+layout.DeleteFileKey(f.Deletion.Key))
			}
		}
		mfs, err := meta.SnapshotByID(int64(v)).Manifests(fio)
		if err != nil {
			t.Fatal(err)
		}
		var data, dels []string
		for _, mf := range mfs {
			for e, err := range mf.Entries(fio, true) {
				if err != nil {
					t.Fatal(err)
				}
				switch e.DataFile().ContentType() {
				case iceberg.EntryContentData:
					data = append(data, e.DataFile().FilePath())
				case iceberg.EntryContentPosDeletes:
					dels = append(dels, e.DataFile().FilePath())
				default:
					t.Fatalf("snapshot %d names %s of content %v", v, e.DataFile().FilePath(), e.DataFile().ContentType())
				}
			}
		}
		slices.Sort(wantData)
		slices.Sort(wantDels)
		slices.Sort(data)
		slices.Sort(dels)
		if !slices.Equal(data, wantData) || !slices.Equal(dels, wantDels) {
			t.Fatalf("version %d: data files %v and delete files %v; its fragments %v and vectors %v", v, data, dels, wantData, wantDels)
		}
	}
}

// recorder is an injector that records every write and injects nothing.
type recorder struct {
	mu     sync.Mutex
	writes map[string][]fault.Op
}

func (r *recorder) Inject(op fault.Op, key string) fault.Fault {
	if slices.Contains(fault.WriteOps, op) {
		r.mu.Lock()
		r.writes[key] = append(r.writes[key], op)
		r.mu.Unlock()
	}
	return fault.Fault{}
}

// Exports — the first, one with nothing new, one after a commit — write
// only under _iceberg/, never delete, and write every object once, the
// version hint excepted (the one object rewritten).
func TestAnExportWritesOnlyTheViewAndRewritesOnlyTheHint(t *testing.T) {
	st := store{url: filepath.Join(t.TempDir(), "t")}
	b := open(t, st.url)
	history(t, b)
	rec := &recorder{writes: map[string][]fault.Op{}}
	fb := fault.Wrap(b, rec)
	l := loc(t, st)
	export := func() {
		t.Helper()
		if _, err := lakehouse.Export(ctx, fb, &lakehouse.Options{Location: l}, time.Now()); err != nil {
			t.Fatal(err)
		}
	}
	export()
	export()
	appendOne(t, b)
	export()
	if len(rec.writes) == 0 {
		t.Fatal("the exports wrote nothing")
	}
	for _, key := range slices.Sorted(maps.Keys(rec.writes)) {
		ops := rec.writes[key]
		if !strings.HasPrefix(key, format.IcebergDir) {
			t.Fatalf("an export wrote %s (%v), outside %s", key, ops, format.IcebergDir)
		}
		if slices.Contains(ops, fault.OpDelete) {
			t.Fatalf("an export deleted %s", key)
		}
		if key != layout.HintKey && len(ops) > 1 {
			t.Fatalf("an export wrote %s %d times (%v)", key, len(ops), ops)
		}
	}
	if len(rec.writes[layout.HintKey]) < 2 {
		t.Fatalf("the hint was written %d times over two exports that changed the view", len(rec.writes[layout.HintKey]))
	}
}
