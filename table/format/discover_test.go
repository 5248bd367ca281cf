package format_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/table/format"
)

// fakeTable makes the folder name under root a table as ListTables sees
// it: a manifest (never decoded here) beside some of a table's own
// objects, one of them named like a table's, which the walk must not
// look into.
func fakeTable(t *testing.T, root blob.Bucket, name string) {
	t.Helper()
	for _, k := range []string{format.ManifestKey(1), "data/f.parquet", "_shards/w1/wal/" + format.Inverted(1),
		"data/nested/" + format.ManifestKey(1), "_shards/w1/" + format.ManifestKey(1)} {
		if err := root.PutIfAbsent(context.Background(), name+"/"+k, []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
}

// placeable is the rule CheckPlacement enforces, by the names alone: no
// table lies in a reserved folder of another.
func placeable(name string, tables []string) bool {
	inside := func(inner, outer string) bool {
		rest, ok := strings.CutPrefix(inner, outer+"/")
		seg, _, _ := strings.Cut(rest, "/")
		return ok && format.Reserved(seg)
	}
	for _, e := range tables {
		if e == name || inside(name, e) || inside(e, name) {
			return false
		}
	}
	return true
}

// Any set of legal names, however they nest and whatever reserved folder
// names they contain, is found whole, and nothing inside a table's own
// folders is taken for a table; CheckPlacement refuses exactly the names
// that would lie in, or hold a table in, a table's own folder.
func TestListTablesFindsEveryLegalNameAndPlacementKeepsTablesApart(t *testing.T) {
	ctx := context.Background()
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	segs := []string{"t", "run_versions", "job_versions", "_versions", "data", "_shards", "_deletions", "_indices",
		"_compactor", "_refs", "_fleet", "_gc", "_iceberg", "x", "a.b", "-y", "versions", "data_x"}
	dir := t.TempDir()
	root, err := blob.OpenFile(dir)
	if err != nil {
		t.Fatal(err)
	}
	var tables []string
	refused := 0
	for range 60 {
		var path []string
		for range 1 + rng.IntN(3) {
			path = append(path, segs[rng.IntN(len(segs))])
		}
		name := strings.Join(path, "/")
		if err := format.CheckName(name); err != nil {
			t.Fatalf("%q: %v", name, err)
		}
		own, err := blob.OpenFile(filepath.Join(dir, filepath.FromSlash(name)))
		if err != nil {
			t.Fatal(err)
		}
		err = format.CheckPlacement(ctx, own, name, func(ctx context.Context, above string) (bool, error) {
			return format.IsTable(ctx, root, above)
		})
		exists := slices.Contains(tables, name)
		switch want := placeable(name, tables); {
		case exists:
			if err != nil {
				t.Fatalf("placing %q where it is: %v (the create reports it)", name, err)
			}
		case want && err != nil:
			t.Fatalf("placing %q beside %q: %v", name, tables, err)
		case !want && !errors.Is(err, format.ErrPlacement):
			t.Fatalf("placing %q beside %q: %v, want ErrPlacement", name, tables, err)
		case !want:
			refused++
			continue
		default:
			fakeTable(t, root, name)
			tables = append(tables, name)
		}
	}
	slices.Sort(tables)
	found, err := format.ListTables(ctx, root)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, l := range found {
		if l.Version != 1 {
			t.Errorf("%q found at version %d, want 1", l.Name, l.Version)
		}
		names = append(names, l.Name)
	}
	if !slices.Equal(names, tables) {
		t.Fatalf("ListTables found %q\nwant %q", names, tables)
	}
	t.Logf("%d tables, %d placements refused", len(tables), refused)
}

// Finding tables lists folders, never what the tables hold: a table of
// five thousand objects costs what a table of five does — a LIST of its
// folder and one of its _versions/ — and nothing but LISTs.
func TestListTablesCostsAListAFolderWhateverTablesHold(t *testing.T) {
	ctx := context.Background()
	stats := func(objects int) blob.Stats {
		b, err := blob.Open(ctx, "mem://")
		if err != nil {
			t.Fatal(err)
		}
		defer b.Close()
		for _, name := range []string{"big", "team/a", "team/b", "_versions"} {
			fakeTable(t, b, name)
		}
		for i := range objects {
			if err := b.Put(ctx, fmt.Sprintf("big/data/%05d.parquet", i), strings.NewReader("x")); err != nil {
				t.Fatal(err)
			}
		}
		before, _ := blob.StatsOf(b)
		found, err := format.ListTables(ctx, b)
		if err != nil || len(found) != 4 {
			t.Fatalf("found %+v, %v", found, err)
		}
		after, _ := blob.StatsOf(b)
		return after.Sub(before)
	}
	small, big := stats(0), stats(5000)
	t.Logf("requests to find 4 tables: %d with 5 objects in the biggest, %d with 5,005", small.Requests(), big.Requests())
	// The root (a folder named _versions makes it worth a second LIST),
	// big, team, team/a, team/b, and _versions (a table, whose own
	// _versions/ holds manifests): 1+1 + 2 + 1 + 2+2 + 2.
	if big != small || big.Lists != 11 || big.Requests() != big.Lists {
		t.Fatalf("finding tables: %+v with 5,005 objects, %+v with 5; want the same 11 LISTs", big, small)
	}
}

func TestTableNames(t *testing.T) {
	for _, name := range []string{"t", "_versions", "data", "run_versions", "x/_shards/y", "-a", "a.b", "A-9_z.", strings.Repeat("a", 128)} {
		if err := format.CheckName(name); err != nil {
			t.Errorf("CheckName(%q): %v", name, err)
		}
	}
	long := strings.Repeat(strings.Repeat("a", 100)+"/", 6)
	for _, name := range []string{"", ".x", "a/.b", "a//b", "/a", "a/", "a/../b", "..", "a b", "a\\b", "é", strings.Repeat("a", 129), long} {
		err := format.CheckName(name)
		var ne *format.NameError
		if !errors.Is(err, format.ErrBadName) || !errors.As(err, &ne) || !strings.Contains(err.Error(), fmt.Sprintf("%q", name)) {
			t.Errorf("CheckName(%q) = %v, want a NameError naming it", name, err)
		}
	}
}

// A table is refused where it would lie in a table's own folder, or hold
// one in its own; the error says which table and folder.
func TestCheckPlacementNamesTheTableInTheWay(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	root, err := blob.OpenFile(dir)
	if err != nil {
		t.Fatal(err)
	}
	fakeTable(t, root, "x")
	fakeTable(t, root, "p/data")
	check := func(name string) error {
		own, err := blob.OpenFile(filepath.Join(dir, filepath.FromSlash(name)))
		if err != nil {
			t.Fatal(err)
		}
		return format.CheckPlacement(ctx, own, name, func(ctx context.Context, above string) (bool, error) {
			return format.IsTable(ctx, root, above)
		})
	}
	for name, want := range map[string]string{
		"x/_shards/y": `table "x/_shards/y" would lie in _shards/ of table "x"`,
		"x/data":      `table "x/data" would lie in data/ of table "x"`,
		"p":           `table "p" cannot be created: its data/ folder, which would be its own, holds table "p/data"`,
	} {
		if err := check(name); !errors.Is(err, format.ErrPlacement) || !strings.Contains(err.Error(), want) {
			t.Errorf("placing %q: %v, want %q", name, err, want)
		}
	}
	for _, name := range []string{"x/sub", "x/sub/_shards", "p/q", "run_versions", "_versions", "x"} {
		if err := check(name); err != nil {
			t.Errorf("placing %q: %v", name, err)
		}
	}
}
