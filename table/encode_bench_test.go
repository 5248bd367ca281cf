package table_test

import (
	"testing"

	"github.com/stratadb/strata/table"
	"github.com/stratadb/strata/table/format"
)

func BenchmarkManifestCodec(b *testing.B) {
	bk := memBucket(b)
	newTable(b, bk, 200, 5)
	s, _ := table.Open(ctx, bk, nil)
	m := s.Manifest()
	data, _ := format.EncodeManifest(m)
	b.Run("encode-200-fragments", func(b *testing.B) {
		for b.Loop() {
			_, _ = format.EncodeManifest(m)
		}
		b.ReportMetric(float64(len(data)), "bytes")
	})
	b.Run("transaction-200-fragments", func(b *testing.B) {
		for b.Loop() {
			_, _ = format.DecodeTransaction("k", data)
		}
	})
	b.Run("decode-200-fragments", func(b *testing.B) {
		for b.Loop() {
			_, _ = format.DecodeManifest("k", data)
		}
	})
}
