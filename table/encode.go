package table

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"runtime"
	"sync"

	"github.com/klauspost/compress/zstd"
)

// Manifest objects are a fixed header followed by a zstd-compressed
// payload of two JSON documents, the transaction first, so that it can be
// read without decoding the state:
//
//	payload: u32 LE length T | T bytes: transaction JSON | state JSON
//
// The header:
//
//	offset size
//	0      8    magic "STRATAMF"
//	8      2    major format version, little-endian
//	10     2    minor format version
//	12     4    flags (bit 0: payload is zstd-compressed)
//	16     8    payload length in bytes
//	24     4    CRC-32C (Castagnoli) of the payload
//	28     …    payload
const (
	manifestMagic   = "STRATAMF"
	headerSize      = 28
	flagZstd        = 1
	maxManifestSize = 1 << 30
)

var (
	crcTable = crc32.MakeTable(crc32.Castagnoli)
	encOnce  sync.Once
	zenc     *zstd.Encoder
	zdec     *zstd.Decoder
)

func codecs() (*zstd.Encoder, *zstd.Decoder) {
	encOnce.Do(func() {
		zenc, _ = zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderConcurrency(runtime.GOMAXPROCS(0)))
		zdec, _ = zstd.NewReader(nil, zstd.WithDecoderConcurrency(runtime.GOMAXPROCS(0)), zstd.WithDecoderMaxMemory(maxManifestSize))
	})
	return zenc, zdec
}

// EncodeManifest serialises m.
func EncodeManifest(m *Manifest) ([]byte, error) {
	txn, err := json.Marshal(&m.Transaction)
	if err != nil {
		return nil, fmt.Errorf("table: encode manifest v%d: %w", m.Version, err)
	}
	state, err := marshalState(m)
	if err != nil {
		return nil, fmt.Errorf("table: encode manifest v%d: %w", m.Version, err)
	}
	payload := make([]byte, 4, 4+len(txn)+len(state))
	binary.LittleEndian.PutUint32(payload, uint32(len(txn)))
	payload = append(append(payload, txn...), state...)
	enc, _ := codecs()
	comp := enc.EncodeAll(payload, nil)
	out := make([]byte, headerSize, headerSize+len(comp))
	copy(out, manifestMagic)
	binary.LittleEndian.PutUint16(out[8:], FormatMajor)
	binary.LittleEndian.PutUint16(out[10:], FormatMinor)
	binary.LittleEndian.PutUint32(out[12:], flagZstd)
	binary.LittleEndian.PutUint64(out[16:], uint64(len(comp)))
	binary.LittleEndian.PutUint32(out[24:], crc32.Checksum(comp, crcTable))
	return append(out, comp...), nil
}

// DecodeManifest parses a manifest object read from key. It never panics:
// anything wrong is a *CorruptError naming key, or ErrUnsupportedFormat.
func DecodeManifest(key string, data []byte) (*Manifest, error) {
	txn, state, err := splitPayload(key, data)
	if err != nil {
		return nil, err
	}
	var m Manifest
	if err := json.Unmarshal(state, &m); err != nil {
		return nil, corrupt(key, "payload is not a manifest", err)
	}
	if err := json.Unmarshal(txn, &m.Transaction); err != nil {
		return nil, corrupt(key, "transaction does not decode", err)
	}
	if err := m.validate(key); err != nil {
		return nil, err
	}
	return &m, nil
}

// DecodeTransaction parses only the transaction of a manifest object: the
// cheap read a committer makes of each version it missed.
func DecodeTransaction(key string, data []byte) (*Transaction, error) {
	raw, _, err := splitPayload(key, data)
	if err != nil {
		return nil, err
	}
	var t Transaction
	if err := json.Unmarshal(raw, &t); err != nil {
		return nil, corrupt(key, "transaction does not decode", err)
	}
	if v, ok := ParseManifestKey(key); ok && t.Version != 0 && t.Version != v {
		return nil, corrupt(key, fmt.Sprintf("transaction made version %d, the name says %d", t.Version, v), nil)
	}
	return &t, nil
}

// splitPayload checks the header and checksum, decompresses, and splits
// the payload into its transaction and state documents.
func splitPayload(key string, data []byte) (txn, state []byte, err error) {
	if len(data) < headerSize {
		return nil, nil, corrupt(key, fmt.Sprintf("%d bytes is shorter than the %d-byte manifest header", len(data), headerSize), nil)
	}
	if string(data[:8]) != manifestMagic {
		return nil, nil, corrupt(key, "not a manifest (bad magic)", nil)
	}
	major := binary.LittleEndian.Uint16(data[8:])
	minor := binary.LittleEndian.Uint16(data[10:])
	if major != FormatMajor {
		return nil, nil, fmt.Errorf("table: manifest %q has format %d.%d; this build reads major version %d: %w",
			key, major, minor, FormatMajor, ErrUnsupportedFormat)
	}
	flags := binary.LittleEndian.Uint32(data[12:])
	n := binary.LittleEndian.Uint64(data[16:])
	payload := data[headerSize:]
	if uint64(len(payload)) != n {
		return nil, nil, corrupt(key, fmt.Sprintf("payload is %d bytes, header says %d (truncated?)", len(payload), n), nil)
	}
	if got, want := crc32.Checksum(payload, crcTable), binary.LittleEndian.Uint32(data[24:]); got != want {
		return nil, nil, corrupt(key, fmt.Sprintf("checksum %08x, header says %08x", got, want), nil)
	}
	if flags&^uint32(flagZstd) != 0 {
		return nil, nil, corrupt(key, fmt.Sprintf("unknown flags %#x", flags), nil)
	}
	if flags&flagZstd != 0 {
		_, dec := codecs()
		if payload, err = dec.DecodeAll(payload, nil); err != nil {
			return nil, nil, corrupt(key, "payload does not decompress", err)
		}
	}
	if len(payload) < 4 {
		return nil, nil, corrupt(key, "payload too short", nil)
	}
	t := uint64(binary.LittleEndian.Uint32(payload))
	if t > uint64(len(payload)-4) {
		return nil, nil, corrupt(key, fmt.Sprintf("transaction length %d exceeds the payload", t), nil)
	}
	return payload[4 : 4+t], payload[4+t:], nil
}

// validate checks what the rest of the engine assumes of a manifest.
func (m *Manifest) validate(key string) error {
	if v, ok := ParseManifestKey(key); ok && v != m.Version {
		return corrupt(key, fmt.Sprintf("holds version %d, its name says %d", m.Version, v), nil)
	}
	if m.Version == 0 || m.TableID == "" {
		return corrupt(key, "missing version or table id", nil)
	}
	s, err := DecodeSchema(m.SchemaIPC)
	if err != nil {
		return corrupt(key, "schema does not decode", err)
	}
	m.schema = s
	seen := make(map[uint64]bool, len(m.Fragments))
	for _, f := range m.Fragments {
		if seen[f.ID] || f.ID >= m.NextFragmentID {
			return corrupt(key, fmt.Sprintf("fragment id %d is repeated or not below next_fragment_id %d", f.ID, m.NextFragmentID), nil)
		}
		seen[f.ID] = true
		if f.Rows < 0 || f.Bytes < 0 || (f.Deletion != nil && (f.Deletion.Count < 0 || f.Deletion.Count > f.Rows)) {
			return corrupt(key, fmt.Sprintf("fragment %d has impossible counts", f.ID), nil)
		}
	}
	return nil
}

// fragmentJSON caches the encoding of fragment entries: a committer
// re-encodes the whole state on every attempt, and all but a few entries
// are the same as last time. Within one table an entry is immutable but
// for its id (given at each commit attempt) and its deletion vector; object
// keys are relative to the table, so the table id is part of the key too
// (two tables in one process may hold the same relative key), with the
// sizes as a last guard.
type fragmentCacheKey struct {
	table              string
	id                 uint64
	key, delKey        string
	rows, bytes, count int64
}

var fragmentJSON struct {
	sync.Mutex
	m map[fragmentCacheKey][]byte
}

const fragmentJSONCacheMax = 1 << 16

func encodeFragment(tableID string, f *Fragment) ([]byte, error) {
	k := fragmentCacheKey{table: tableID, id: f.ID, key: f.Key, rows: f.Rows, bytes: f.Bytes}
	if f.Deletion != nil {
		k.delKey, k.count = f.Deletion.Key, f.Deletion.Count
	}
	fragmentJSON.Lock()
	data, ok := fragmentJSON.m[k]
	fragmentJSON.Unlock()
	if ok {
		return data, nil
	}
	data, err := json.Marshal(f)
	if err != nil {
		return nil, err
	}
	fragmentJSON.Lock()
	if fragmentJSON.m == nil || len(fragmentJSON.m) >= fragmentJSONCacheMax {
		fragmentJSON.m = make(map[fragmentCacheKey][]byte)
	}
	fragmentJSON.m[k] = data
	fragmentJSON.Unlock()
	return data, nil
}

// marshalState encodes the manifest's state with cached fragment entries;
// the result is the same as json.Marshal(m), with "fragments" first.
func marshalState(m *Manifest) ([]byte, error) {
	type plain Manifest // no methods: the default encoding
	rest, err := json.Marshal(struct {
		*plain
		// Shadows plain.Fragments; nil, so left out. (A "-" tag would not
		// shadow: encoding/json drops such fields before resolving names.)
		Fragments *struct{} `json:"fragments,omitempty"`
	}{plain: (*plain)(m)})
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	buf.Grow(len(rest) + 512*len(m.Fragments))
	buf.WriteString(`{"fragments":[`)
	for i := range m.Fragments {
		data, err := encodeFragment(m.TableID, &m.Fragments[i])
		if err != nil {
			return nil, err
		}
		if i > 0 {
			buf.WriteByte(',')
		}
		buf.Write(data)
	}
	buf.WriteString("],")
	buf.Write(rest[1:]) // rest is a non-empty object: it has table_id
	return buf.Bytes(), nil
}
