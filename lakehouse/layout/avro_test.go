package layout

import (
	"bytes"
	"fmt"
	"slices"
	"testing"

	"github.com/apache/iceberg-go"
)

// manifestPaths reads of a manifest list, of each format version the
// Iceberg writer writes, exactly the paths iceberg-go's own reader reads:
// garbage collection keeps what it names, so a path it missed would be a
// file of the view deleted.
func TestManifestPathsReadsWhatIcebergGoReads(t *testing.T) {
	for version := 1; version <= 3; version++ {
		var files []iceberg.ManifestFile
		for i := range 500 {
			b := iceberg.NewManifestFile(version, fmt.Sprintf("s3://lake/t/_iceberg/metadata/m-%d-%d.avro", version, i), int64(1000+i), 0, 7)
			if version > 1 {
				b = b.SequenceNum(int64(i), int64(i))
			}
			files = append(files, b.AddedFiles(int32(i)).AddedRows(int64(10*i)).Build())
		}
		var list bytes.Buffer
		seq := int64(500)
		if err := iceberg.WriteManifestList(version, &list, 7, nil, &seq, 0, files); err != nil {
			t.Fatalf("v%d: %v", version, err)
		}
		want, err := iceberg.ReadManifestList(bytes.NewReader(list.Bytes()))
		if err != nil {
			t.Fatalf("v%d: iceberg-go reads: %v", version, err)
		}
		var wantPaths []string
		for _, f := range want {
			wantPaths = append(wantPaths, f.FilePath())
		}
		got, err := manifestPaths(list.Bytes())
		if err != nil {
			t.Fatalf("v%d: %v", version, err)
		}
		if len(got) != 500 || !slices.Equal(got, wantPaths) {
			t.Fatalf("v%d: read %d paths, iceberg-go %d; first %q and %q", version, len(got), len(wantPaths), got[:min(1, len(got))], wantPaths[:min(1, len(wantPaths))])
		}
	}
}
