package format

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"runtime"
	"slices"
	"sync"

	"github.com/klauspost/compress/zstd"

	"github.com/stratadb/strata/table/evolve"
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
	CRCTable = crc32.MakeTable(crc32.Castagnoli)
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
//
// The payload is stored as zstd frames one after another (RFC 8878 allows
// it; decompressed, they are the payload): the first holds the length and
// the transaction, so that a committer catching up reads a transaction by
// decompressing that frame alone; then the state, its fragment entries
// manifestChunk to a frame. A committer encodes the whole state again on
// every attempt, and its entries are mostly those of the version before:
// the frames of whole chunks are cached, and only a chunk that changed is
// compressed again.
func EncodeManifest(m *Manifest) ([]byte, error) {
	txn, err := json.Marshal(&m.Transaction)
	if err != nil {
		return nil, fmt.Errorf("table: encode manifest v%d: %w", m.Version, err)
	}
	rest, err := marshalRest(m)
	if err != nil {
		return nil, fmt.Errorf("table: encode manifest v%d: %w", m.Version, err)
	}
	enc, _ := codecs()
	out := make([]byte, headerSize, headerSize+len(txn)/4+len(rest)/4+1024*(len(m.Fragments)/manifestChunk+1))
	head := make([]byte, 4, 4+len(txn))
	binary.LittleEndian.PutUint32(head, uint32(len(txn)))
	out = enc.EncodeAll(append(head, txn...), out)
	if len(m.Fragments) == 0 {
		out = enc.EncodeAll([]byte(`{"fragments":[`), out)
	}
	for i := 0; i < len(m.Fragments); i += manifestChunk {
		if out, err = appendChunk(out, m.TableID, m.Fragments[i:min(i+manifestChunk, len(m.Fragments))], i == 0); err != nil {
			return nil, fmt.Errorf("table: encode manifest v%d: %w", m.Version, err)
		}
	}
	// rest is a non-empty object (it has table_id): its fields follow the
	// fragments.
	out = enc.EncodeAll(append([]byte("],"), rest[1:]...), out)
	comp := out[headerSize:]
	copy(out, manifestMagic)
	binary.LittleEndian.PutUint16(out[8:], m.writtenMajor())
	binary.LittleEndian.PutUint16(out[10:], m.writtenMinor())
	binary.LittleEndian.PutUint32(out[12:], flagZstd)
	binary.LittleEndian.PutUint64(out[16:], uint64(len(comp)))
	binary.LittleEndian.PutUint32(out[24:], crc32.Checksum(comp, CRCTable))
	return out, nil
}

// manifestChunk: fragment entries per zstd frame of a manifest.
const manifestChunk = 32

// chunkCacheKey names the frame of a whole chunk: its entries, and whether
// it is the first (which opens the state document; the others start with
// a comma).
type chunkCacheKey struct {
	first   bool
	entries [manifestChunk]fragmentCacheKey
}

var chunkFrames struct {
	sync.Mutex
	m map[chunkCacheKey][]byte
}

const chunkFramesCacheMax = 1 << 10

// appendChunk appends to out the frame of fragment entries fs (at most
// manifestChunk of them), from the cache when fs is a whole chunk seen
// before.
func appendChunk(out []byte, tableID string, fs []Fragment, first bool) ([]byte, error) {
	var k chunkCacheKey
	whole := len(fs) == manifestChunk
	if whole {
		k.first = first
		for i := range fs {
			k.entries[i] = fragmentKey(tableID, &fs[i])
		}
		chunkFrames.Lock()
		frame, ok := chunkFrames.m[k]
		chunkFrames.Unlock()
		if ok {
			return append(out, frame...), nil
		}
	}
	var buf bytes.Buffer
	buf.Grow(640 * len(fs))
	if first {
		buf.WriteString(`{"fragments":[`)
	}
	for i := range fs {
		data, err := encodeFragment(tableID, &fs[i])
		if err != nil {
			return nil, err
		}
		if i > 0 || !first {
			buf.WriteByte(',')
		}
		buf.Write(data)
	}
	enc, _ := codecs()
	start := len(out)
	out = enc.EncodeAll(buf.Bytes(), out)
	if whole {
		chunkFrames.Lock()
		if chunkFrames.m == nil || len(chunkFrames.m) >= chunkFramesCacheMax {
			chunkFrames.m = make(map[chunkCacheKey][]byte)
		}
		chunkFrames.m[k] = slices.Clone(out[start:])
		chunkFrames.Unlock()
	}
	return out, nil
}

// DecodeManifest parses a manifest object read from key. It never panics:
// anything wrong is a *CorruptError naming key, or ErrUnsupportedFormat.
func DecodeManifest(key string, data []byte) (*Manifest, error) {
	txn, state, err := splitPayload(key, data, false)
	if err != nil {
		return nil, err
	}
	var m Manifest
	m.major, m.minor = binary.LittleEndian.Uint16(data[8:]), binary.LittleEndian.Uint16(data[10:])
	if err := json.Unmarshal(state, &m); err != nil {
		return nil, Corrupt(key, "payload is not a manifest", err)
	}
	if err := json.Unmarshal(txn, &m.Transaction); err != nil {
		return nil, Corrupt(key, "transaction does not decode", err)
	}
	m.Transaction.major, m.Transaction.minor = m.major, m.minor
	if err := m.validate(key); err != nil {
		return nil, err
	}
	return &m, nil
}

// DecodeTransaction parses only the transaction of a manifest object: the
// cheap read a committer makes of each version it missed.
func DecodeTransaction(key string, data []byte) (*Transaction, error) {
	raw, _, err := splitPayload(key, data, true)
	if err != nil {
		return nil, err
	}
	var t Transaction
	if err := json.Unmarshal(raw, &t); err != nil {
		return nil, Corrupt(key, "transaction does not decode", err)
	}
	t.major, t.minor = binary.LittleEndian.Uint16(data[8:]), binary.LittleEndian.Uint16(data[10:])
	if v, ok := ParseManifestKey(key); ok && t.Version != 0 && t.Version != v {
		return nil, Corrupt(key, fmt.Sprintf("transaction made version %d, the name says %d", t.Version, v), nil)
	}
	return &t, nil
}

// splitPayload checks the header and checksum, decompresses, and splits
// the payload into its transaction and state documents. With txnOnly, the
// state may be left out (nil): only the frame that holds the transaction
// is decompressed, when it can be told apart.
func splitPayload(key string, data []byte, txnOnly bool) (txn, state []byte, err error) {
	if len(data) < headerSize {
		return nil, nil, Corrupt(key, fmt.Sprintf("%d bytes is shorter than the %d-byte manifest header", len(data), headerSize), nil)
	}
	if string(data[:8]) != manifestMagic {
		return nil, nil, Corrupt(key, "not a manifest (bad magic)", nil)
	}
	major := binary.LittleEndian.Uint16(data[8:])
	minor := binary.LittleEndian.Uint16(data[10:])
	if major != FormatMajor && major != FormatEvolved {
		return nil, nil, fmt.Errorf("table: manifest %q has format %d.%d; this build reads major versions %d and %d: %w",
			key, major, minor, FormatMajor, FormatEvolved, ErrUnsupportedFormat)
	}
	flags := binary.LittleEndian.Uint32(data[12:])
	n := binary.LittleEndian.Uint64(data[16:])
	payload := data[headerSize:]
	if uint64(len(payload)) != n {
		return nil, nil, Corrupt(key, fmt.Sprintf("payload is %d bytes, header says %d (truncated?)", len(payload), n), nil)
	}
	if got, want := crc32.Checksum(payload, CRCTable), binary.LittleEndian.Uint32(data[24:]); got != want {
		return nil, nil, Corrupt(key, fmt.Sprintf("checksum %08x, header says %08x", got, want), nil)
	}
	if flags&^uint32(flagZstd) != 0 {
		return nil, nil, Corrupt(key, fmt.Sprintf("unknown flags %#x", flags), nil)
	}
	if flags&flagZstd != 0 {
		_, dec := codecs()
		claimed, complete := claimedSize(payload)
		if claimed > maxExpansion*uint64(len(payload)) || claimed > maxManifestSize {
			return nil, nil, Corrupt(key, fmt.Sprintf("payload of %d bytes claims %d bytes decompressed", len(payload), claimed), nil)
		}
		if txnOnly {
			if txn, ok := firstFrameTransaction(dec, payload); ok {
				return txn, nil, nil
			}
		}
		if !complete {
			claimed = 0 // the buffer grows as the payload decompresses
		}
		if payload, err = dec.DecodeAll(payload, make([]byte, 0, claimed)); err != nil {
			return nil, nil, Corrupt(key, "payload does not decompress", err)
		}
	}
	if len(payload) < 4 {
		return nil, nil, Corrupt(key, "payload too short", nil)
	}
	t := uint64(binary.LittleEndian.Uint32(payload))
	if t > uint64(len(payload)-4) {
		return nil, nil, Corrupt(key, fmt.Sprintf("transaction length %d exceeds the payload", t), nil)
	}
	return payload[4 : 4+t], payload[4+t:], nil
}

// frameEnd returns the length of the zstd frame at the start of data and
// its header (false when data does not start with a whole frame).
func frameEnd(data []byte) (int, zstd.Header, bool) {
	var h zstd.Header
	if err := h.Decode(data); err != nil || h.Skippable || !h.FirstBlock.OK {
		return 0, h, false
	}
	at := h.HeaderSize
	for {
		if at+3 > len(data) {
			return 0, h, false
		}
		bh := uint32(data[at]) | uint32(data[at+1])<<8 | uint32(data[at+2])<<16
		size := int(bh >> 3)
		switch (bh >> 1) & 3 {
		case 1: // RLE: one byte, repeated
			size = 1
		case 3: // reserved
			return 0, h, false
		}
		at += 3 + size
		if bh&1 != 0 { // the last block
			break
		}
	}
	if h.HasCheckSum {
		at += 4
	}
	if at > len(data) {
		return 0, h, false
	}
	return at, h, true
}

// maxExpansion bounds what a manifest's frames may claim to decompress to,
// as a multiple of their compressed size. JSON entries that each hold a
// random key compress some tenfold; a header claiming more than this is
// damage, and the decoder would allocate what it claims before decoding.
const maxExpansion = 1 << 10

// claimedSize sums the decompressed sizes that payload's frame headers
// claim, up to the first frame that cannot be walked or gives no size;
// complete is true when every frame was summed.
func claimedSize(payload []byte) (total uint64, complete bool) {
	for len(payload) > 0 {
		n, h, ok := frameEnd(payload)
		if h.HasFCS {
			if h.FrameContentSize > maxManifestSize {
				return h.FrameContentSize, false
			}
			total += h.FrameContentSize
		}
		if !ok || !h.HasFCS {
			return total, false
		}
		payload = payload[n:]
	}
	return total, true
}

// firstFrameTransaction decompresses the first zstd frame of payload and
// returns the transaction, when that frame holds the whole of it (as
// EncodeManifest writes it). ok is false otherwise — an older manifest
// whose first frame ends the transaction nowhere, any doubt — and the
// caller decompresses everything.
func firstFrameTransaction(dec *zstd.Decoder, payload []byte) (txn []byte, ok bool) {
	n, h, ok := frameEnd(payload)
	if !ok || n == len(payload) {
		return nil, false // one frame: decompressing it is decompressing everything
	}
	first, err := dec.DecodeAll(payload[:n], make([]byte, 0, min(h.FrameContentSize, maxManifestSize)))
	if err != nil || len(first) < 4 {
		return nil, false
	}
	t := uint64(binary.LittleEndian.Uint32(first))
	if t > uint64(len(first)-4) {
		return nil, false
	}
	return first[4 : 4+t], true
}

// validate checks what the rest of the engine assumes of a manifest.
func (m *Manifest) validate(key string) error {
	if v, ok := ParseManifestKey(key); ok && v != m.Version {
		return Corrupt(key, fmt.Sprintf("holds version %d, its name says %d", m.Version, v), nil)
	}
	if m.Version == 0 || m.TableID == "" {
		return Corrupt(key, "missing version or table id", nil)
	}
	s, err := evolve.DecodeSchema(m.SchemaIPC)
	if err != nil {
		return Corrupt(key, "schema does not decode", err)
	}
	m.schema = s
	seen := make(map[uint64]bool, len(m.Fragments))
	for _, f := range m.Fragments {
		if seen[f.ID] || f.ID >= m.NextFragmentID {
			return Corrupt(key, fmt.Sprintf("fragment id %d is repeated or not below next_fragment_id %d", f.ID, m.NextFragmentID), nil)
		}
		seen[f.ID] = true
		if f.Rows < 0 || f.Bytes < 0 || (f.Deletion != nil && (f.Deletion.Count < 0 || f.Deletion.Count > f.Rows)) {
			return Corrupt(key, fmt.Sprintf("fragment %d has impossible counts", f.ID), nil)
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

// fragmentKey is the cache key of f's entry in table tableID.
func fragmentKey(tableID string, f *Fragment) fragmentCacheKey {
	k := fragmentCacheKey{table: tableID, id: f.ID, key: f.Key, rows: f.Rows, bytes: f.Bytes}
	if f.Deletion != nil {
		k.delKey, k.count = f.Deletion.Key, f.Deletion.Count
	}
	return k
}

func encodeFragment(tableID string, f *Fragment) ([]byte, error) {
	k := fragmentKey(tableID, f)
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

// marshalRest encodes the manifest's state without its fragments: the
// fields that follow them in the state document.
func marshalRest(m *Manifest) ([]byte, error) {
	type plain Manifest // no methods: the default encoding
	return json.Marshal(struct {
		*plain
		// Shadows plain.Fragments; nil, so left out. (A "-" tag would not
		// shadow: encoding/json drops such fields before resolving names.)
		Fragments *struct{} `json:"fragments,omitempty"`
	}{plain: (*plain)(m)})
}
