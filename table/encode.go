package table

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"sync"

	"github.com/klauspost/compress/zstd"
)

// Manifest objects are a fixed header followed by a zstd-compressed JSON
// payload:
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
		zenc, _ = zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedDefault), zstd.WithEncoderConcurrency(1))
		zdec, _ = zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxMemory(maxManifestSize))
	})
	return zenc, zdec
}

// EncodeManifest serialises m.
func EncodeManifest(m *Manifest) ([]byte, error) {
	payload, err := json.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("table: encode manifest v%d: %w", m.Version, err)
	}
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
	if len(data) < headerSize {
		return nil, corrupt(key, fmt.Sprintf("%d bytes is shorter than the %d-byte manifest header", len(data), headerSize), nil)
	}
	if string(data[:8]) != manifestMagic {
		return nil, corrupt(key, "not a manifest (bad magic)", nil)
	}
	major := binary.LittleEndian.Uint16(data[8:])
	minor := binary.LittleEndian.Uint16(data[10:])
	if major != FormatMajor {
		return nil, fmt.Errorf("table: manifest %q has format %d.%d; this build reads major version %d: %w",
			key, major, minor, FormatMajor, ErrUnsupportedFormat)
	}
	flags := binary.LittleEndian.Uint32(data[12:])
	n := binary.LittleEndian.Uint64(data[16:])
	payload := data[headerSize:]
	if uint64(len(payload)) != n {
		return nil, corrupt(key, fmt.Sprintf("payload is %d bytes, header says %d (truncated?)", len(payload), n), nil)
	}
	if got, want := crc32.Checksum(payload, crcTable), binary.LittleEndian.Uint32(data[24:]); got != want {
		return nil, corrupt(key, fmt.Sprintf("checksum %08x, header says %08x", got, want), nil)
	}
	if flags&^uint32(flagZstd) != 0 {
		return nil, corrupt(key, fmt.Sprintf("unknown flags %#x", flags), nil)
	}
	if flags&flagZstd != 0 {
		_, dec := codecs()
		var err error
		if payload, err = dec.DecodeAll(payload, nil); err != nil {
			return nil, corrupt(key, "payload does not decompress", err)
		}
	}
	var m Manifest
	d := json.NewDecoder(bytes.NewReader(payload))
	d.UseNumber()
	if err := d.Decode(&m); err != nil {
		return nil, corrupt(key, "payload is not a manifest", err)
	}
	if err := m.validate(key); err != nil {
		return nil, err
	}
	return &m, nil
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
