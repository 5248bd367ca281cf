package lakehouse_test

import (
	"errors"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/stratadb/strata/commit"
	"github.com/stratadb/strata/lakehouse"
	"github.com/stratadb/strata/lakehouse/layout"
)

// withFieldIDs gives each field of sc the Parquet field id 1000+i.
func withFieldIDs(sc *arrow.Schema) []arrow.Field {
	fields := sc.Fields()
	for i := range fields {
		fields[i].Metadata = arrow.NewMetadata([]string{"PARQUET:field_id"}, []string{strconv.Itoa(1000 + i)})
	}
	return fields
}

// A wide table whose columns carry field ids keeps them in the view when
// its columns are reordered and one is added; an overwrite that gives a
// column another id, moves an id to another column or changes a column's
// type is refused, naming the column.
func TestFieldIDsOfAWideTableFollowTheirColumns(t *testing.T) {
	const cols, rows = 1500, 4
	v1 := withFieldIDs(wideSchema(cols))
	reordered := slices.Clone(v1)
	slices.Reverse(reordered)
	extra := arrow.Field{Name: "extra", Type: arrow.PrimitiveTypes.Int64, Nullable: true,
		Metadata: arrow.NewMetadata([]string{"PARQUET:field_id"}, []string{"9"})}
	changed := func(i int, f func(*arrow.Field)) []arrow.Field {
		out := slices.Clone(v1)
		f(&out[i])
		return out
	}
	for name, c := range map[string]struct {
		v2   []arrow.Field
		want string // "" when the export must succeed
	}{
		"reordered with one more": {append(reordered, extra), ""},
		"another id":              {changed(700, func(f *arrow.Field) { f.Metadata = extra.Metadata }), `column "c00700" changed field id from 1700 to 9`},
		"an id moved":             {changed(701, func(f *arrow.Field) { f.Name = "moved" }), `field id 1701 moved from column "c00701" to "moved"`},
		"another type":            {changed(702, func(f *arrow.Field) { f.Type, f.Nullable = arrow.BinaryTypes.String, true }), `column "c00702" changed type`},
	} {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "t")
			b := open(t, dir)
			sc1 := arrow.NewSchema(v1, nil)
			r1 := wideBatch(t, sc1, rows)
			defer r1.Release()
			if _, err := commit.Create(ctx, b, sc1, nil, nil, r1); err != nil {
				t.Fatal(err)
			}
			currentReadsTheSame(t, dir, b)
			sc2 := arrow.NewSchema(c.v2, nil)
			r2 := wideBatch(t, sc2, rows)
			defer r2.Release()
			tb, err := commit.OpenTable(ctx, b, nil)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := tb.Overwrite(ctx, sc2, r2); err != nil {
				t.Fatal(err)
			}
			if c.want != "" {
				loc, _ := layout.LocationOf(dir)
				_, err := lakehouse.Export(ctx, b, &lakehouse.Options{Location: loc}, time.Now())
				if !errors.Is(err, layout.ErrUnsupported) || !strings.Contains(err.Error(), c.want) {
					t.Fatalf("export: %v, want layout.ErrUnsupported saying %s", err, c.want)
				}
				return
			}
			res := currentReadsTheSame(t, dir, b)
			fields := readMeta(t, store{}, res.MetadataLocation).CurrentSchema().Fields()
			for i, f := range fields {
				if want, _ := strconv.Atoi(sc2.Field(i).Metadata.Values()[0]); f.Name != sc2.Field(i).Name || f.ID != want {
					t.Fatalf("column %d is %q with id %d, want %q with id %d", i, f.Name, f.ID, sc2.Field(i).Name, want)
				}
			}
		})
	}
}
