package format

import (
	"fmt"
	"slices"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/stratadb/strata/table/evolve"
	"github.com/stratadb/strata/table/value"
)

// FormatMajor and FormatMinor are the manifest format this build writes.
// A reader rejects a manifest of a higher major version; a higher minor
// version only adds fields, which older readers ignore. A table whose
// schema was ever changed (Alter) is written as FormatEvolved: its
// fragments may lie out otherwise than its schema, which a reader that
// does not resolve stored names (evolve.go) would misread, so such a
// reader refuses it.
const (
	FormatMajor   = 1
	FormatEvolved = 2
	FormatMinor   = 1
)

// Manifest is the whole state of one version of a table.
type Manifest struct {
	TableID   string    `json:"table_id"`
	Version   uint64    `json:"version"`
	Parent    uint64    `json:"parent"` // 0 for version 1
	Timestamp time.Time `json:"timestamp"`
	// Schema is the table's Arrow schema, as an Arrow IPC schema message.
	SchemaIPC      []byte               `json:"schema_ipc"`
	Fragments      []Fragment           `json:"fragments"`
	NextFragmentID uint64               `json:"next_fragment_id"`
	Shards         map[string]ShardMark `json:"shards,omitempty"`
	Indexes        []Index              `json:"indexes,omitempty"`
	Remap          []RemapEntry         `json:"remap,omitempty"`
	Config         map[string]string    `json:"config,omitempty"`
	// ClusterBy is the table's cluster key, the stored names of its
	// columns (see evolve.ClusterKey): compaction writes fragments sorted
	// by it. A manifest with one is written in minor format 1, which a
	// build that does not know the key refuses to build on.
	ClusterBy []string `json:"cluster_by,omitempty"`
	// Producers records the table's recent idempotent direct appends (see
	// Idempotency).
	Producers Producers `json:"producers,omitempty"`
	// Transaction made this version. It is stored apart from the state
	// (see EncodeManifest), so a committer catching up can read it alone.
	Transaction Transaction `json:"-"`

	schema *arrow.Schema // decoded SchemaIPC, cached
	// major and minor: the format of the object it was decoded from (0:
	// made here, not decoded).
	major, minor uint16
}

// Fragment is one immutable Parquet data object and what is known of it.
type Fragment struct {
	ID       uint64        `json:"id"`
	Key      string        `json:"key"` // object key under the table's prefix
	Rows     int64         `json:"rows"`
	Bytes    int64         `json:"bytes"`
	Columns  []ColumnStats `json:"columns,omitempty"`
	Deletion *Deletion     `json:"deletion,omitempty"`
	// Created is when the object was written (the writer's clock): a
	// commit whose fragment is older than MinGCAge checks that garbage
	// collection has not taken it meanwhile.
	Created time.Time `json:"created,omitzero"`
	// SchemaID is the id of the table schema the fragment was written
	// under (see SchemaIDKey); its columns lie out as that schema's
	// stored schema does.
	SchemaID uint64 `json:"schema_id,omitempty"`
	// Chunks and Footer, when set, say where the object's bytes lie, so
	// that a read of some columns asks for their bytes and the footer in
	// one round trip (see Spans): Chunks[0] is where the first column
	// chunk starts, and each next value how far the next boundary lies
	// past the one before — the start of the next chunk, row group by row
	// group and leaf by leaf in the stored schema's order, then the end of
	// the last; Footer is the length of the Parquet footer with its 8-byte
	// trailer, the object's last bytes. They are hints: a reader checks
	// what it reads against the footer, and a fragment without them (or
	// with more than MaxLaidOutChunks chunks) is read as before.
	Chunks []int64 `json:"chunks,omitempty"`
	Footer int64   `json:"footer,omitempty"`
	// SortedBy, when set, is the cluster key (stored names) the
	// fragment's rows are sorted by, ascending with nulls last: compaction
	// sorts again only fragments not sorted by the table's key.
	SortedBy []string `json:"sorted_by,omitempty"`
}

// MinGCAge is the least age at which garbage collection may delete an
// object no version references: an upload younger than this is safe on
// its way to a commit. GC's retention and safety age are never below it.
const MinGCAge = 5 * time.Minute

// Garbage collection's default retention: the newest DefaultKeepVersions
// versions and those younger than DefaultRetention are kept. The Iceberg
// view (package lakehouse) describes the same versions by default.
const (
	DefaultKeepVersions = 10
	DefaultRetention    = time.Hour
)

// LiveRows is the number of rows not deleted.
func (f *Fragment) LiveRows() int64 {
	if f.Deletion == nil {
		return f.Rows
	}
	return f.Rows - f.Deletion.Count
}

// Stats returns the statistics of column name, or nil.
func (f *Fragment) Stats(name string) *ColumnStats {
	for i := range f.Columns {
		if f.Columns[i].Name == name {
			return &f.Columns[i]
		}
	}
	return nil
}

// ColumnStats bound one column's values in a fragment. Min and Max are
// nil when unknown (all nulls, or values too long to record).
type ColumnStats struct {
	Name  string       `json:"name"`
	Min   *value.Value `json:"min,omitempty"`
	Max   *value.Value `json:"max,omitempty"`
	Nulls int64        `json:"nulls"`
}

// Deletion names a fragment's deletion vector: the row offsets deleted.
type Deletion struct {
	Key   string `json:"key"`
	Count int64  `json:"count"`
}

// ShardMark is what the table records of one write-ahead-log shard: the
// newest generation merged into the table, and Seq, a state of the shard
// (a flush object's sequence number) every generation of which is merged:
// a merger has nothing to read in the shard's flush objects at or below
// it, and those not the shard's newest are garbage once a while old.
//
// WAL is the newest WAL position a merged generation covers: a shard
// retired (its objects gone) and opened again numbers its WAL entries
// above it, so that an owner of before the retirement, whose positions
// go on from its own state, writes where the new owner's fence is, or
// below where the new owner replays from.
type ShardMark struct {
	Watermark uint64 `json:"watermark"`
	Epoch     uint64 `json:"epoch,omitempty"`
	Seq       uint64 `json:"seq,omitempty"`
	WAL       uint64 `json:"wal,omitempty"`
}

// Index describes a key index (used by later format features).
type Index struct {
	ID     string `json:"id"`
	Column string `json:"column"`
	Key    string `json:"key"` // the index object
	Rows   int64  `json:"rows"`
	// CoveredBelow: the index holds every row of the fragments with a
	// smaller id that existed when it was built (ids are never reused, so
	// that is every such fragment still in the table or remapped). Newer
	// fragments are found by a statistics-pruned scan until the index is
	// rebuilt.
	CoveredBelow uint64 `json:"covered_below"`
	// Directory and Blocks, on an index of a string or binary column (a
	// paged index, keyed by hash: see table.EncodeHashIndex), say where
	// its directory lies and how many blocks it names, so that a lookup
	// reads the directory without first reading the object's trailer.
	// They are hints: without them the object is read whole.
	Directory int64 `json:"directory,omitempty"`
	Blocks    int   `json:"blocks,omitempty"`
}

// RemapEntry records where a Rewrite moved the rows of one fragment: the
// row at offset o of fragment From is now at Base + o − (rows of From
// deleted before o, per the deletion vector Deletion) in fragment To.
// Indexes translate through these entries instead of being rewritten.
type RemapEntry struct {
	From     uint64 `json:"from"`
	To       uint64 `json:"to"`
	Base     uint32 `json:"base"`
	Deletion string `json:"deletion,omitempty"`
}

// Kind is a transaction's operation.
type Kind string

// Operation kinds.
const (
	KindCreate      Kind = "create"
	KindOverwrite   Kind = "overwrite"
	KindAppend      Kind = "append"
	KindDelete      Kind = "delete"
	KindRewrite     Kind = "rewrite"
	KindMerge       Kind = "merge"
	KindCreateIndex Kind = "create_index"
	// KindUpsert adds rows and, in the same commit, deletes every live
	// row whose key (Transaction.Keys) one of them has.
	KindUpsert Kind = "upsert"
	// KindUpdate deletes the rows an update matched and adds them again
	// with its assignments applied.
	KindUpdate Kind = "update"
	// KindAlter changes the schema (Transaction.SchemaIPC), by metadata
	// alone: no fragment changes.
	KindAlter Kind = "alter"
)

// Transaction is what a commit does, as a plain value. The manifest it
// makes records it, so the commit loop can tell which commit landed and
// the conflict matrix can compare commits.
type Transaction struct {
	Kind        Kind   `json:"kind"`
	CommitID    string `json:"commit_id"`    // a ULID, unique per logical commit
	ReadVersion uint64 `json:"read_version"` // the version it was planned against
	Writer      string `json:"writer,omitempty"`
	// Added are the fragments the commit adds; their ids are assigned when
	// the transaction is applied, and recorded.
	Added []Fragment `json:"added,omitempty"`
	// Removed are fragment ids the commit removes (Rewrite, Overwrite).
	Removed []uint64 `json:"removed,omitempty"`
	// Deletions are new deletion vectors, by fragment id (Delete, Upsert,
	// and a Rewrite that takes back an upsert).
	Deletions []FragmentDeletion `json:"deletions,omitempty"`
	// Keys are an upsert's key columns, by stored name (the names their
	// statistics carry in fragments; see StoredName).
	Keys []string `json:"keys,omitempty"`
	// DeletesUnmatched is set on an upsert (a merge by key) that deletes
	// the live rows whose key its rows lack: rows that land before it plan
	// it again, whatever their keys.
	DeletesUnmatched bool `json:"deletes_unmatched,omitempty"`
	// KeyRange is, on an upsert with clauses, the range of each key column
	// (stored name) over all its rows, written or not: rows that land
	// first within it plan it again (its added fragments' statistics
	// cover only the rows it writes).
	KeyRange []ColumnStats `json:"key_range,omitempty"`
	// Read are, on an upsert with clauses, the fragments holding live rows
	// it matched and left (a condition false, or matches ignored): a
	// delete, update or upsert of them that lands first plans it again.
	Read []uint64 `json:"read,omitempty"`
	// Committed is the version's commit time, its manifest's timestamp
	// (never before its parent's): a version rebuilt from its transaction
	// (commit.Replay) keeps it.
	Committed time.Time `json:"committed,omitzero"`
	// Shard and Watermark are set by a shard owner's Merge, and by a
	// merge of a shard's upserts; Seq, when set, is a state of the shard
	// all of whose generations it merges (see ShardMark.Seq).
	Shard     string `json:"shard,omitempty"`
	Watermark uint64 `json:"watermark,omitempty"`
	Epoch     uint64 `json:"epoch,omitempty"`
	Seq       uint64 `json:"seq,omitempty"`
	WAL       uint64 `json:"wal,omitempty"` // see ShardMerge.WAL
	// Merges are set by a fleet merge: many shards' generations in one
	// commit (Added holds them; their keys name shard and generation).
	Merges []ShardMerge `json:"merges,omitempty"`
	// Whole is set on a merge whose added fragments hold copies of the
	// rows of flush objects, several shards' in one fragment: it applies
	// as planned, from each part's From, or not at all (a retryable
	// conflict) — it cannot be trimmed to what other merges left.
	Whole bool `json:"whole,omitempty"`
	// SchemaIPC is set by Create, Overwrite and Alter.
	SchemaIPC []byte `json:"schema_ipc,omitempty"`
	// Changes describe an Alter's column changes, for people (SchemaIPC
	// holds the schema they made): "rename reward to score".
	Changes []string `json:"changes,omitempty"`
	// Dropped are the stored names of the columns an Alter dropped: an
	// append that wrote values under one of them, planned before, would
	// lose them, and conflicts instead.
	Dropped []string `json:"dropped,omitempty"`
	// Remap is set by a Rewrite of a table with indexes. In a transaction
	// being planned, To is the position in Added; once applied, the id.
	Remap []RemapEntry `json:"remap,omitempty"`
	// Cluster is set by an Alter that sets the cluster key (Columns
	// empty: clears it).
	Cluster *Clustering `json:"cluster,omitempty"`
	// Index is set by CreateIndex.
	Index *Index `json:"index,omitempty"`
	// Undoes is set on a Rewrite that takes back the commit of that
	// version, whose data garbage collection took while it stalled, and on
	// a Delete that takes back a delete of that version whose deletion
	// vector garbage collection took (compactor.Repair): it gives the
	// fragments their deletion vectors from before.
	Undoes uint64 `json:"undoes,omitempty"`
	// Restores is set on an overwrite that restores that version: its
	// added fragments are that version's, objects and deletion vectors
	// alike (commit.Table.Restore).
	Restores uint64 `json:"restores,omitempty"`
	// Idempotency names an append (or a create with rows) that its caller
	// may send again: applied, it is recorded in the state's producers, and
	// a transaction whose name the state already records is not applied.
	Idempotency *AppendKey `json:"idempotency,omitempty"`
	// Named are the idempotent appends whose rows a merge installs (see
	// NamedRows): applied, those not dropped are recorded in the state's
	// producers, as a direct append's name is.
	Named []NamedRows `json:"named,omitempty"`
	// Time is the committer's clock (commit.Options.Now) at the attempt
	// that made the version: the names a merge installs or drops are
	// recorded as of it (Producers.RecordNamed), so that the window of a
	// name met in several shards counts from its latest merge.
	Time time.Time `json:"time,omitzero"`

	// Set when the transaction is applied: the version it made, and a
	// fingerprint of the resulting state, so that replaying the recorded
	// transaction on the previous version can be checked.
	Version        uint64 `json:"version,omitempty"`
	NextFragmentID uint64 `json:"next_fragment_id,omitempty"`
	FragmentCount  int    `json:"fragment_count,omitempty"`

	// major and minor: the format of the manifest it was decoded from
	// (0: made here).
	major, minor uint16
}

// Format is the format version of the manifest t was read from (0.0 for
// one made here).
func (t *Transaction) Format() (major, minor uint16) { return t.major, t.minor }

// Clustering is an Alter's cluster key: the stored names of its columns,
// none to clear it.
type Clustering struct {
	Columns []string `json:"columns"`
}

// ShardMerge is one shard's part of a fleet merge: its generations up to
// Watermark, read from a state the owner of Epoch wrote.
type ShardMerge struct {
	Shard     string `json:"shard"`
	Watermark uint64 `json:"watermark"`
	Epoch     uint64 `json:"epoch"`
	// From is the watermark the part merges from (set on a Whole merge).
	From uint64 `json:"from,omitempty"`
	// Seq, when set, is a state of the shard all of whose generations are
	// at or below Watermark (see ShardMark.Seq).
	Seq uint64 `json:"seq,omitempty"`
	// WAL is the newest WAL position the merged generations cover (see
	// ShardMark.WAL).
	WAL uint64 `json:"wal,omitempty"`
}

// MergedShards returns what a merge moves: one shard for an owner's
// merge, many for a fleet merge.
func (t *Transaction) MergedShards() []ShardMerge {
	if t.Kind != KindMerge {
		return nil
	}
	if len(t.Merges) > 0 {
		return t.Merges
	}
	return []ShardMerge{{Shard: t.Shard, Watermark: t.Watermark, Epoch: t.Epoch}}
}

// FragmentDeletion replaces one fragment's deletion vector.
type FragmentDeletion struct {
	FragmentID uint64   `json:"fragment_id"`
	Deletion   Deletion `json:"deletion"`
}

// Touched returns the ids of existing fragments the transaction changes
// (removes, or gives a new deletion vector), sorted.
func (t *Transaction) Touched() []uint64 {
	ids := slices.Clone(t.Removed)
	for _, d := range t.Deletions {
		ids = append(ids, d.FragmentID)
	}
	slices.Sort(ids)
	return slices.Compact(ids)
}

// Schema returns the table's Arrow schema.
func (m *Manifest) Schema() *arrow.Schema { return m.schema }

// writtenMajor is the major format version this build writes m in:
// FormatEvolved for a table whose schema was ever changed.
func (m *Manifest) writtenMajor() uint16 {
	sc := m.schema
	if sc == nil {
		sc, _ = evolve.DecodeSchema(m.SchemaIPC)
	}
	if evolve.Evolved(sc) {
		return FormatEvolved
	}
	return FormatMajor
}

// writtenMinor is the minor format version this build writes m in: 1
// (FormatMinor) for a table with a cluster key, which a build of minor 0
// would drop from the versions it commits, or a version an Alter of the
// key made; 0 otherwise, which builds of either minor write.
func (m *Manifest) writtenMinor() uint16 {
	if len(m.ClusterBy) > 0 || m.Transaction.Cluster != nil {
		return FormatMinor
	}
	return 0
}

// Format is m's format version: the one of the object it was read from,
// or, for a manifest made here, the one this build writes it in.
func (m *Manifest) Format() (major, minor uint16) {
	if m.major != 0 {
		return m.major, m.minor
	}
	return m.writtenMajor(), m.writtenMinor()
}

// CheckWritable refuses (a *NewerFormatError, which is ErrUnsupportedFormat) to build a version on m when m
// was written in a format newer than this build's: a higher minor version
// adds fields this build would not copy into the next version, losing
// them. Every commit checks its base (package commit), and a writer checks
// the latest version before it writes anything.
func (m *Manifest) CheckWritable() error {
	if major, minor := m.Format(); minor > FormatMinor {
		return &NewerFormatError{Major: major, Minor: minor, Version: m.Version}
	}
	return nil
}

// NewerFormatError: a table version written in a format newer than this
// build's; reading it is safe, building on it is not.
type NewerFormatError struct {
	Major, Minor uint16
	Version      uint64
}

func (e *NewerFormatError) Error() string {
	return fmt.Sprintf("table: version %d is written in format %d.%d, newer than this build's %d.%d: an upgraded strata reads and writes it (this build may read it, never write to it, which would drop what it does not know)",
		e.Version, e.Major, e.Minor, e.Major, FormatMinor)
}

func (e *NewerFormatError) Is(target error) bool { return target == ErrUnsupportedFormat }

// Objects are the keys of the objects m references: its fragments, their
// deletion vectors, its key indexes and the deletion vectors its remap
// entries name. (Schema markers, shards' objects and
// the table's refs are the table's, not a version's.)
func (m *Manifest) Objects() []string {
	var out []string
	for _, f := range m.Fragments {
		out = append(out, f.Key)
		if f.Deletion != nil {
			out = append(out, f.Deletion.Key)
		}
	}
	for _, ix := range m.Indexes {
		out = append(out, ix.Key)
	}
	// A remap entry ranks a rewritten fragment's rows by the deletion
	// vector it had then: lookups through an index read it.
	for _, e := range m.Remap {
		if e.Deletion != "" {
			out = append(out, e.Deletion)
		}
	}
	return out
}

// IndexOn is the key index on column col, if there is one.
func (m *Manifest) IndexOn(col string) *Index {
	for i := range m.Indexes {
		if m.Indexes[i].Column == col {
			return &m.Indexes[i]
		}
	}
	return nil
}

// Rows is the number of live rows.
func (m *Manifest) Rows() int64 {
	var n int64
	for i := range m.Fragments {
		n += m.Fragments[i].LiveRows()
	}
	return n
}

// Bytes is the size of the data objects.
func (m *Manifest) Bytes() int64 {
	var n int64
	for i := range m.Fragments {
		n += m.Fragments[i].Bytes
	}
	return n
}

// Fragment returns the fragment with id, or nil.
func (m *Manifest) Fragment(id uint64) *Fragment {
	for i := range m.Fragments {
		if m.Fragments[i].ID == id {
			return &m.Fragments[i]
		}
	}
	return nil
}

// Clone returns a deep enough copy to build the next version from.
func (m *Manifest) Clone() *Manifest {
	c := *m
	c.major, c.minor = 0, 0 // a clone is made here: it is written in this build's format
	c.Fragments = slices.Clone(m.Fragments)
	c.Indexes = slices.Clone(m.Indexes)
	c.Remap = slices.Clone(m.Remap)
	c.ClusterBy = slices.Clone(m.ClusterBy)
	c.Producers = slices.Clone(m.Producers)
	if m.Shards != nil {
		c.Shards = make(map[string]ShardMark, len(m.Shards))
		for k, v := range m.Shards {
			c.Shards[k] = v
		}
	}
	if m.Config != nil {
		c.Config = make(map[string]string, len(m.Config))
		for k, v := range m.Config {
			c.Config[k] = v
		}
	}
	return &c
}

// ManifestOf is a manifest of fragments of one schema that no version
// lists (a shard's generations, say), to read them as a table.
func ManifestOf(schema *arrow.Schema, fragments []Fragment) *Manifest {
	return &Manifest{Fragments: fragments, schema: schema}
}

// Refresh re-derives a manifest's cached fields (its decoded schema) after
// it was built or changed in memory.
func Refresh(m *Manifest) error {
	s, err := evolve.DecodeSchema(m.SchemaIPC)
	if err != nil {
		return fmt.Errorf("table: manifest v%d schema: %w", m.Version, err)
	}
	m.schema = s
	return nil
}
