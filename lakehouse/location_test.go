package lakehouse_test

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/commit"
	"github.com/stratadb/strata/harness/rollouts"
	"github.com/stratadb/strata/lakehouse"
	"github.com/stratadb/strata/lakehouse/layout"
	"github.com/stratadb/strata/table/format"
)

// A view written for one location names every file under it: an export at
// another location is refused naming both, whether or not there is
// anything new (it used to say the view was unchanged, every file it names
// out of readers' reach), until the view is deleted and written afresh.
func TestAnExportAtAnotherLocationThanTheViewsIsRefusedNamingBoth(t *testing.T) {
	st := store{url: filepath.Join(t.TempDir(), "t")}
	b := open(t, st.url)
	if _, err := commit.Create(ctx, b, rollouts.Schema, nil, nil); err != nil {
		t.Fatal(err)
	}
	appendOne(t, b)
	wrong, right := "s3://not-this-bucket/t", loc(t, st)
	if _, err := lakehouse.Export(ctx, b, &lakehouse.Options{Location: wrong}, time.Now()); err != nil {
		t.Fatal(err)
	}
	check := func(what string) {
		t.Helper()
		_, err := lakehouse.Export(ctx, b, &lakehouse.Options{Location: right}, time.Now())
		var le *lakehouse.LocationError
		if !errors.Is(err, layout.ErrLocationMismatch) || !errors.As(err, &le) || le.View != wrong || le.Export != right ||
			!strings.Contains(err.Error(), wrong) || !strings.Contains(err.Error(), right) {
			t.Fatalf("%s: an export at %s over a view written for %s: %v, want a LocationError naming both", what, right, wrong, err)
		}
	}
	check("nothing new")
	appendOne(t, b)
	check("a new version")
	var keys []string
	for o, err := range blob.List(ctx, b, format.IcebergDir, 0) {
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, o.Key)
	}
	if err := blob.DeleteAll(ctx, b, keys); err != nil {
		t.Fatal(err)
	}
	res, err := lakehouse.Export(ctx, b, &lakehouse.Options{Location: right}, time.Now())
	if err != nil || !res.Written || !strings.HasPrefix(res.MetadataLocation, right+"/") {
		t.Fatalf("an export after the view was deleted: %+v %v", res, err)
	}
	if meta := readMeta(t, st, res.MetadataLocation); meta.Location() != right {
		t.Fatalf("the view written afresh names its files under %s, want %s", meta.Location(), right)
	}
}
