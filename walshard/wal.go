package walshard

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/stratadb/strata/table"
)

// WAL entry objects:
//
//	offset size
//	0      8    magic "STRATAWL"
//	8      2    format version (1)
//	10     1    kind: 1 data, 2 fence
//	11     1    reserved (0)
//	12     8    epoch of the writer
//	20     8    position
//	28     26   entry id (a ULID, ASCII): tells a writer its own entry
//	54     8    payload length
//	62     4    CRC-32C of the payload
//	66     …    payload: an Arrow IPC stream of the rows (data), empty (fence)
const (
	walMagic  = "STRATAWL"
	walHeader = 66
	kindData  = 1
	kindFence = 2
)

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// ErrCorruptEntry: a WAL entry that does not decode. The shard refuses to
// skip it: the rows in it were acknowledged.
var ErrCorruptEntry = errors.New("walshard: corrupt WAL entry")

// CorruptEntryError names the shard, position and object.
type CorruptEntryError struct {
	Shard    string
	Position uint64
	Key      string
	Reason   string
}

func (e *CorruptEntryError) Error() string {
	return fmt.Sprintf("walshard: shard %q: WAL entry at position %d (%s) is corrupt: %s; refusing to skip acknowledged rows",
		e.Shard, e.Position, e.Key, e.Reason)
}

// Is makes errors.Is(err, ErrCorruptEntry) true.
func (e *CorruptEntryError) Is(target error) bool { return target == ErrCorruptEntry }

type entry struct {
	kind     byte
	epoch    uint64
	position uint64
	id       string
	batches  []arrow.RecordBatch // data entries
}

func encodeEntry(e *entry, schema *arrow.Schema) ([]byte, error) {
	var payload bytes.Buffer
	if e.kind == kindData {
		w := ipc.NewWriter(&payload, ipc.WithSchema(schema), ipc.WithLZ4())
		for _, rec := range e.batches {
			if err := w.Write(rec); err != nil {
				return nil, err
			}
		}
		if err := w.Close(); err != nil {
			return nil, err
		}
	}
	out := make([]byte, walHeader, walHeader+payload.Len())
	copy(out, walMagic)
	binary.LittleEndian.PutUint16(out[8:], 1)
	out[10] = e.kind
	binary.LittleEndian.PutUint64(out[12:], e.epoch)
	binary.LittleEndian.PutUint64(out[20:], e.position)
	copy(out[28:54], e.id)
	binary.LittleEndian.PutUint64(out[54:], uint64(payload.Len()))
	binary.LittleEndian.PutUint32(out[62:], crc32.Checksum(payload.Bytes(), crcTable))
	return append(out, payload.Bytes()...), nil
}

// decodeEntry parses an entry; with header only, it leaves the payload.
func decodeEntry(shard, key string, pos uint64, data []byte, schema *arrow.Schema, headerOnly bool) (_ *entry, err error) {
	bad := func(reason string) error {
		return &CorruptEntryError{Shard: shard, Position: pos, Key: key, Reason: reason}
	}
	if len(data) < walHeader || string(data[:8]) != walMagic {
		return nil, bad("not a WAL entry")
	}
	if v := binary.LittleEndian.Uint16(data[8:]); v != 1 {
		return nil, bad(fmt.Sprintf("unknown format version %d", v))
	}
	e := &entry{kind: data[10], epoch: binary.LittleEndian.Uint64(data[12:]), position: binary.LittleEndian.Uint64(data[20:]),
		id: string(bytes.TrimRight(data[28:54], "\x00"))}
	if e.position != pos {
		return nil, bad(fmt.Sprintf("holds position %d", e.position))
	}
	n := binary.LittleEndian.Uint64(data[54:])
	payload := data[walHeader:]
	if uint64(len(payload)) != n {
		return nil, bad(fmt.Sprintf("payload is %d bytes, header says %d", len(payload), n))
	}
	if crc32.Checksum(payload, crcTable) != binary.LittleEndian.Uint32(data[62:]) {
		return nil, bad("checksum mismatch")
	}
	switch e.kind {
	case kindFence:
		return e, nil
	case kindData:
	default:
		return nil, bad(fmt.Sprintf("unknown kind %d", e.kind))
	}
	if headerOnly {
		return e, nil
	}
	defer func() {
		if r := recover(); r != nil {
			err = bad(fmt.Sprintf("arrow payload: %v", r))
		}
	}()
	r, err := ipc.NewReader(bytes.NewReader(payload), ipc.WithAllocator(memory.DefaultAllocator))
	if err != nil {
		return nil, bad("arrow payload: " + err.Error())
	}
	defer r.Release()
	if err := table.CheckSchema(schema, r.Schema()); err != nil {
		return nil, bad("rows of another schema")
	}
	for r.Next() {
		rec := r.RecordBatch()
		rec.Retain()
		e.batches = append(e.batches, rec)
	}
	if err := r.Err(); err != nil {
		for _, rec := range e.batches {
			rec.Release()
		}
		return nil, bad("arrow payload: " + err.Error())
	}
	return e, nil
}

// recordBytes is the memory a batch's buffers take.
func recordBytes(rec arrow.RecordBatch) int64 {
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
