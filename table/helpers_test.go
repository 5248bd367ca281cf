package table_test

import (
	"encoding/binary"
	"hash/crc32"

	"github.com/stratadb/strata/table/format"
)

func crc32c(b []byte) uint32 { return crc32.Checksum(b, crc32.MakeTable(crc32.Castagnoli)) }

// manifestObject wraps a stored payload in a valid manifest header: this
// build's major version, flags (1: zstd-compressed), the payload's length
// and checksum.
func manifestObject(payload []byte, flags uint32) []byte {
	d := make([]byte, 28, 28+len(payload))
	copy(d, "STRATAMF")
	binary.LittleEndian.PutUint16(d[8:], format.FormatMajor)
	binary.LittleEndian.PutUint32(d[12:], flags)
	binary.LittleEndian.PutUint64(d[16:], uint64(len(payload)))
	binary.LittleEndian.PutUint32(d[24:], crc32c(payload))
	return append(d, payload...)
}
