package wal

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/stratadb/strata/internal/ipcguard"
	"github.com/stratadb/strata/table/evolve"
	"github.com/stratadb/strata/table/format"
	"github.com/stratadb/strata/table/fragment"
)

// WAL entry objects come in two forms. With Options.ReuseBytes set, a
// data entry whose rows take that many bytes in memory is a Parquet
// fragment (format version 2): the table's own encoding of the rows, so
// that a large one can join the table as it is when flushed, with no
// second copy. Its footer's key-value metadata
// holds, under "strata.wal", a JSON object:
//
//	{"version": 2, "kind": 1, "epoch": E, "position": P, "id": ULID,
//	 "crc32c": CRC-32C of the object's bytes before the footer}
//
// A fence, and otherwise a data entry (format version 1, or 3 when it
// holds idempotent appends), is a binary header and a payload:
//
//	offset size
//	0      8    magic "STRATAWL"
//	8      2    format version (1, or 3)
//	10     1    kind: 1 data, 2 fence
//	11     1    reserved (0)
//	12     8    epoch of the writer
//	20     8    position
//	28     26   entry id (a ULID, ASCII): tells a writer its own entry
//	54     8    payload length
//	62     4    CRC-32C of the payload
//	66     …    payload: an Arrow IPC stream of the rows (data), empty (fence)
//
// In format version 3 the payload starts with the entry's idempotent
// appends: a u32 length A, then A bytes of JSON (see appendRecord), then
// the Arrow IPC stream. Format version 4 holds upserts (Shard.Upsert): its
// payload starts with a u32 length and that many bytes of JSON,
// {"keys": [stored names of the key columns], "appends": [...]}, then the
// Arrow IPC stream; an upsert entry is never a Parquet entry, and builds
// before version 4 refuse it as corrupt rather than take its rows for an
// append's. A Parquet data entry lists them under "appends" in
// its header. Builds before version 3 refuse such an entry as corrupt;
// entries without idempotent appends are written as before.
const (
	walMagic  = "STRATAWL"
	Header    = 66
	KindData  = 1
	KindFence = 2
	// walMetaKey names a Parquet data entry's header in its footer.
	walMetaKey = "strata.wal"
)

// walMeta is a Parquet data entry's header.
type walMeta struct {
	Version  int    `json:"version"`
	Kind     byte   `json:"kind"`
	Epoch    uint64 `json:"epoch"`
	Position uint64 `json:"position"`
	ID       string `json:"id"`
	CRC      uint32 `json:"crc32c"`
	// Appends: the idempotent appends whose rows the entry holds.
	Appends []AppendRecord `json:"appends,omitempty"`
}

// AppendRecord is an idempotent append as a WAL entry records it: its
// name, and how many of the entry's rows are its own.
type AppendRecord struct {
	format.AppendKey
	Rows int64 `json:"rows"`
	// Offset: the append's first row among the entry's (absent in
	// entries of older builds, whose named rows a merge cannot tell
	// apart: it installs them as they are).
	Offset *int64 `json:"offset,omitempty"`
}

var crcTable = crc32.MakeTable(crc32.Castagnoli)

type Entry struct {
	Kind     byte
	Epoch    uint64
	Position uint64
	Id       string
	Batches  []arrow.RecordBatch // data entries
	Appends  []AppendRecord      // the idempotent appends among them
	// keys: the key columns (stored names) of an entry of upserts.
	Keys []string
	// frag: a data entry's size and statistics as a fragment (set by
	// encodeEntry; Key unset).
	Frag format.Fragment
}

// EncodeEntry encodes an entry: a data entry as a Parquet fragment when
// asked (setting e.frag), else in the binary form.
func EncodeEntry(e *Entry, schema *arrow.Schema, asParquet bool) ([]byte, error) {
	if e.Kind == KindData && asParquet && len(e.Keys) == 0 {
		data, frag, err := fragment.Encode(schema, e.Batches, func(pages []byte) (string, string) {
			meta, _ := json.Marshal(walMeta{Version: 2, Kind: KindData, Epoch: e.Epoch, Position: e.Position, ID: e.Id,
				CRC: crc32.Checksum(pages, crcTable), Appends: e.Appends})
			return walMetaKey, string(meta)
		})
		if err != nil {
			return nil, err
		}
		e.Frag = frag
		return data, nil
	}
	var payload bytes.Buffer
	version := uint16(1)
	if e.Kind == KindData && (len(e.Appends) > 0 || len(e.Keys) > 0) {
		version = 3
		var js []byte
		var err error
		if len(e.Keys) > 0 {
			version = 4
			js, err = json.Marshal(upsertHeader{Keys: e.Keys, Appends: e.Appends})
		} else {
			js, err = json.Marshal(e.Appends)
		}
		if err != nil {
			return nil, err
		}
		payload.Write(binary.LittleEndian.AppendUint32(nil, uint32(len(js))))
		payload.Write(js)
	}
	if e.Kind == KindData {
		w := ipc.NewWriter(&payload, ipc.WithSchema(schema), ipc.WithLZ4())
		for _, rec := range e.Batches {
			if err := w.Write(rec); err != nil {
				return nil, err
			}
		}
		if err := w.Close(); err != nil {
			return nil, err
		}
	}
	out := make([]byte, Header, Header+payload.Len())
	copy(out, walMagic)
	binary.LittleEndian.PutUint16(out[8:], version)
	out[10] = e.Kind
	binary.LittleEndian.PutUint64(out[12:], e.Epoch)
	binary.LittleEndian.PutUint64(out[20:], e.Position)
	copy(out[28:54], e.Id)
	binary.LittleEndian.PutUint64(out[54:], uint64(payload.Len()))
	binary.LittleEndian.PutUint32(out[62:], crc32.Checksum(payload.Bytes(), crcTable))
	return append(out, payload.Bytes()...), nil
}

// decodeParquetEntry parses a data entry of format version 2.
func decodeParquetEntry(key string, pos uint64, data []byte, headerOnly bool, bad func(string) error) (*Entry, error) {
	raw, ok, pages, err := fragment.FooterValue(data, walMetaKey)
	if err != nil {
		return nil, bad(err.Error())
	}
	if !ok {
		return nil, bad("a Parquet object without a WAL header")
	}
	var meta walMeta
	if err := json.Unmarshal([]byte(raw), &meta); err != nil {
		return nil, bad("WAL header: " + err.Error())
	}
	if meta.Version != 2 || meta.Kind != KindData {
		return nil, bad(fmt.Sprintf("unknown format version %d or kind %d", meta.Version, meta.Kind))
	}
	e := &Entry{Kind: KindData, Epoch: meta.Epoch, Position: meta.Position, Id: meta.ID, Appends: meta.Appends}
	if e.Position != pos {
		return nil, bad(fmt.Sprintf("holds position %d", e.Position))
	}
	if crc32.Checksum(pages, crcTable) != meta.CRC {
		return nil, bad("checksum mismatch")
	}
	if headerOnly {
		return e, nil
	}
	e.Batches, err = fragment.Decode(context.Background(), key, data)
	if err != nil {
		return nil, bad(err.Error())
	}
	return e, nil
}

// DecodeEntry parses an entry; with header only, it leaves the payload.
func DecodeEntry(shard, key string, pos uint64, data []byte, schema *arrow.Schema, headerOnly bool) (_ *Entry, err error) {
	bad := func(reason string) error {
		return &CorruptEntryError{Shard: shard, Position: pos, Key: key, Reason: reason}
	}
	var e *Entry
	if bytes.HasPrefix(data, []byte("PAR1")) {
		if e, err = decodeParquetEntry(key, pos, data, headerOnly, bad); err != nil || headerOnly {
			return e, err
		}
		return ConformEntry(shard, key, pos, e, schema, true)
	}
	if len(data) < Header || string(data[:8]) != walMagic {
		return nil, bad("not a WAL entry")
	}
	version := binary.LittleEndian.Uint16(data[8:])
	if version != 1 && version != 3 && version != 4 {
		return nil, bad(fmt.Sprintf("unknown format version %d", version))
	}
	e = &Entry{Kind: data[10], Epoch: binary.LittleEndian.Uint64(data[12:]), Position: binary.LittleEndian.Uint64(data[20:]),
		Id: string(bytes.TrimRight(data[28:54], "\x00"))}
	if e.Position != pos {
		return nil, bad(fmt.Sprintf("holds position %d", e.Position))
	}
	n := binary.LittleEndian.Uint64(data[54:])
	payload := data[Header:]
	if uint64(len(payload)) != n {
		return nil, bad(fmt.Sprintf("payload is %d bytes, header says %d", len(payload), n))
	}
	if crc32.Checksum(payload, crcTable) != binary.LittleEndian.Uint32(data[62:]) {
		return nil, bad("checksum mismatch")
	}
	switch e.Kind {
	case KindFence:
		return e, nil
	case KindData:
	default:
		return nil, bad(fmt.Sprintf("unknown kind %d", e.Kind))
	}
	if version >= 3 {
		if payload, err = decodeAppends(e, payload, version == 4); err != nil {
			return nil, bad(err.Error())
		}
	}
	if headerOnly {
		return e, nil
	}
	defer func() {
		if r := recover(); r != nil {
			err = bad(fmt.Sprintf("arrow payload: %v", r))
		}
	}()
	// The IPC reader allocates the lengths a message claims before it
	// reads, past any recover: they are checked against the payload first.
	size := int64(len(payload))
	r, err := ipc.NewReader(ipcguard.New(bytes.NewReader(payload), size, size, size), ipc.WithAllocator(memory.DefaultAllocator))
	if err != nil {
		return nil, bad("arrow payload: " + err.Error())
	}
	defer r.Release()
	for r.Next() {
		rec := r.RecordBatch()
		rec.Retain()
		e.Batches = append(e.Batches, rec)
	}
	if err := r.Err(); err != nil {
		fragment.ReleaseAll(e.Batches)
		return nil, bad("arrow payload: " + err.Error())
	}
	return ConformEntry(shard, key, pos, e, schema, false)
}

// upsertHeader opens the payload of a version 4 entry.
type upsertHeader struct {
	Keys    []string       `json:"keys"`
	Appends []AppendRecord `json:"appends,omitempty"`
}

// decodeAppends reads the section that opens a version 3 payload (the
// idempotent appends) or a version 4 one (upserts: upsertHeader) into e,
// and returns the rest of the payload.
func decodeAppends(e *Entry, payload []byte, upserts bool) ([]byte, error) {
	if len(payload) < 4 {
		return nil, errors.New("appends section cut short")
	}
	n := binary.LittleEndian.Uint32(payload)
	if uint64(n) > uint64(len(payload)-4) {
		return nil, fmt.Errorf("appends section of %d bytes in a payload of %d", n, len(payload))
	}
	if upserts {
		var h upsertHeader
		if err := json.Unmarshal(payload[4:4+n], &h); err != nil || len(h.Keys) == 0 {
			return nil, fmt.Errorf("upserts section without key columns: %v", err)
		}
		e.Keys, e.Appends = h.Keys, h.Appends
	} else if err := json.Unmarshal(payload[4:4+n], &e.Appends); err != nil {
		return nil, fmt.Errorf("appends section: %v", err)
	}
	return payload[4+n:], nil
}

// ConformEntry checks a data entry's rows, whichever its form: rows of
// another schema are a damaged entry; then each batch is checked as an
// append would. The rows passed evolve.Conform before they were written;
// an entry of an older build may hold rows that would not, and must not
// reach a generation. Rows read back from Parquet (fromParquet) get the
// table's types as a fragment's do (a Parquet reader widens a timestamp
// in seconds, names list elements its own way): the values are the ones
// written.
func ConformEntry(shard, key string, pos uint64, e *Entry, schema *arrow.Schema, fromParquet bool) (*Entry, error) {
	for i, rec := range e.Batches {
		// Rows written under another schema of the table — an earlier
		// one, or a later one a restore took back — are read as a
		// fragment of it is, by stored name (a column the table no longer
		// knows, after a restore, left out).
		from, to := evolve.SchemaID(rec.Schema()), evolve.SchemaID(schema)
		same := evolve.CheckSchema(schema, rec.Schema()) == nil
		if from == to && same {
			continue
		}
		if from == to && to == 0 && !fromParquet {
			fragment.ReleaseAll(e.Batches)
			return nil, &CorruptEntryError{Shard: shard, Position: pos, Key: key, Reason: "rows of another schema"}
		}
		evolveBatch := evolve.Batch
		if from > to {
			evolveBatch = evolve.BatchDropping
		}
		ev, err := evolveBatch(nil, schema, rec)
		if err != nil {
			fragment.ReleaseAll(e.Batches)
			return nil, &CorruptEntryError{Shard: shard, Position: pos, Key: key, Reason: "rows of another schema: " + err.Error()}
		}
		rec.Release()
		e.Batches[i] = ev
	}
	var base int64
	for i, rec := range e.Batches {
		c, err := evolve.Conform(schema, rec, evolve.ConformOptions{RowBase: base})
		if err != nil {
			fragment.ReleaseAll(e.Batches)
			return nil, &PoisonEntryError{Shard: shard, Position: pos, Key: key, Reason: err.Error()}
		}
		base += rec.NumRows()
		rec.Release()
		e.Batches[i] = c
	}
	return e, nil
}

// RecordBytes is the memory a batch's buffers take.
func RecordBytes(rec arrow.RecordBatch) int64 {
	var n int64
	for _, col := range rec.Columns() {
		n += arrayBytes(col.Data())
	}
	return n
}

func arrayBytes(d arrow.ArrayData) int64 {
	var n int64
	for _, b := range d.Buffers() {
		if b != nil {
			n += int64(b.Len())
		}
	}
	for _, c := range d.Children() {
		n += arrayBytes(c)
	}
	return n
}
