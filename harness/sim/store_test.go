package sim

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/stratadb/strata/blob"
)

// The simulated store lists one folder level as a real bucket does: the
// same objects and folders, in the same pages, for random keys.
func TestStoreListDirAgreesWithAMemoryBucket(t *testing.T) {
	ctx := context.Background()
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	segs := []string{"a", "a-b", "a.b", "_versions", "data", "b", "0"}
	s := NewStore(&Clock{}, false, seed)
	mem, err := blob.Open(ctx, "mem://")
	if err != nil {
		t.Fatal(err)
	}
	defer mem.Close()
	keys, folders := map[string]bool{}, map[string]bool{"": true}
	for range 200 {
		var path []string
		for range 1 + rng.IntN(4) {
			path = append(path, segs[rng.IntN(len(segs))])
		}
		key := strings.Join(path, "/")
		// A key may not also be a folder of another key.
		ok := !keys[key] && !folders[key+"/"]
		for i := 1; i < len(path); i++ {
			ok = ok && !keys[strings.Join(path[:i], "/")]
		}
		if !ok {
			continue
		}
		keys[key] = true
		for i := 1; i < len(path); i++ {
			folders[strings.Join(path[:i], "/")+"/"] = true
		}
		for _, b := range []blob.Bucket{s, mem} {
			if err := b.PutIfAbsent(ctx, key, []byte(key)); err != nil {
				t.Fatal(err)
			}
		}
	}
	for p := range folders {
		for _, size := range []int{1, 3, 0} {
			got, want := listDir(t, s, p, size), listDir(t, mem, p, size)
			if !slices.Equal(got, want) {
				t.Fatalf("ListDir(%q) in pages of %d: %q\nwant %q", p, size, got, want)
			}
		}
	}
}

// listDir lists one level of prefix, a page a line.
func listDir(t *testing.T, b blob.Bucket, prefix string, size int) []string {
	t.Helper()
	var out []string
	token := ""
	for {
		page, err := b.ListDir(context.Background(), prefix, token, size)
		if err != nil {
			t.Fatal(err)
		}
		var keys []string
		for _, o := range page.Objects {
			keys = append(keys, o.Key)
		}
		keys = append(keys, page.Folders...)
		slices.Sort(keys)
		out = append(out, fmt.Sprintf("%q", keys))
		if page.Next == "" {
			return out
		}
		token = page.Next
	}
}
