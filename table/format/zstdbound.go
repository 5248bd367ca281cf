package format

import (
	"sync"

	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/klauspost/compress/zstd"
)

// Parquet pages compressed with zstd are decoded into the buffer the page
// header sizes (at most parquet.DefaultMaxUncompressedPageSize), never
// beyond it. The Parquet reader's own decoder sizes its output by the
// content size the zstd frame declares, up to 64 GiB: a damaged 7 KB file
// whose frames each declared gigabytes made `strata append` allocate them,
// page after page, until the process ran out of memory.
func init() {
	c, err := compress.GetCodec(compress.Codecs.Zstd)
	if err != nil {
		return
	}
	if z, ok := c.(zstdCodec); ok {
		compress.RegisterCodec(compress.Codecs.Zstd, boundedZstd{z})
	}
}

// zstdCodec is what the Parquet package's zstd codec offers.
type zstdCodec interface {
	compress.Codec
	compress.StreamingCodec
}

// boundedZstd is the Parquet package's zstd codec, its whole-page decoding
// bounded by the destination's capacity.
type boundedZstd struct{ zstdCodec }

var boundedDecoder = sync.OnceValue(func() *zstd.Decoder {
	d, err := zstd.NewReader(nil, zstd.WithDecodeAllCapLimit(true), zstd.WithDecoderMaxMemory(1<<30))
	if err != nil {
		panic(err) // only for invalid options
	}
	return d
})

func (boundedZstd) DecodeWithError(dst, src []byte) ([]byte, error) {
	return boundedDecoder().DecodeAll(src, dst[:0])
}

func (b boundedZstd) Decode(dst, src []byte) []byte {
	out, err := b.DecodeWithError(dst, src)
	if err != nil {
		panic(err)
	}
	return out
}
