// Package blobtest is the conformance suite every blob.Bucket backend and
// wrapper passes: one set of named subtests, and a small harness per
// backend that says how to open a fresh bucket.
package blobtest

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stratadb/strata/blob"
)

// Opener returns a fresh, empty bucket for one subtest. It registers its
// own cleanup with t.
type Opener func(t *testing.T) blob.Bucket

// Options tune the suite for a backend.
type Options struct {
	// RaceRounds is how many rounds of 32 goroutines race on a fresh key;
	// 0 means 20.
	RaceRounds int
	// FoldersOverPage: the backend may return more folders than a
	// ListDir page size asks for (the GCS emulator does; GCS and S3 do
	// not). Entries must still come once each, in order.
	FoldersOverPage bool
}

// Run runs the conformance suite against the buckets open returns.
func Run(t *testing.T, open Opener, opts Options) {
	if opts.RaceRounds == 0 {
		opts.RaceRounds = 20
	}
	tests := []struct {
		name string
		fn   func(t *testing.T, b blob.Bucket)
	}{
		{"GetMissingIsNotFoundAndNamesTheKey", testGetMissing},
		{"PutThenGetRoundTrips", testRoundTrip},
		{"PutReplacesWholeObject", testPutReplaces},
		{"PutWhoseReaderFailsWritesNothing", testPutReaderFails},
		{"PutIfAbsentCreatesOnceAndKeepsTheFirst", testPutIfAbsent},
		{"RangeReadsReturnExactBytes", testRangeReads},
		{"ReaderAtReadsWithRanges", testReaderAt},
		{"AttributesGiveSizeAndTime", testAttributes},
		{"DeleteRemovesAndMissingIsNotFound", testDelete},
		{"DeleteAllRemovesEveryKeyAndPassesOverMissingOnes", testDeleteAll},
		{"ListIsInByteOrderAndFiltersByPrefix", testListOrder},
		{"ListPagesCoverEverythingOnce", testListPaging},
		{"ListDirShowsOneLevelInByteOrder", func(t *testing.T, b blob.Bucket) { testListDir(t, b, opts) }},
		{"ListDirPagesCoverTheLevelOnce", func(t *testing.T, b blob.Bucket) { testListDirPaging(t, b, opts) }},
		{"InvalidKeysArePermanentErrors", testInvalidKeys},
		{"CanceledContextStopsRequests", testCanceled},
		{"ConcurrentPutIfAbsentHasOneWinner", func(t *testing.T, b blob.Bucket) { testRace(t, b, opts.RaceRounds) }},
		{"SelfTestPasses", testSelfTest},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := open(t)
			tc.fn(t, b)
		})
	}
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return c
}

func randomBytes(n int) []byte {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return b
}

func put(t *testing.T, b blob.Bucket, key string, data []byte) {
	t.Helper()
	if err := b.Put(ctx(t), key, bytes.NewReader(data)); err != nil {
		t.Fatalf("Put(%q): %v", key, err)
	}
}

func wantKind(t *testing.T, what string, err, kind error) {
	t.Helper()
	if !errors.Is(err, kind) {
		t.Fatalf("%s: got error %v, want kind %v", what, err, kind)
	}
}

func testGetMissing(t *testing.T, b blob.Bucket) {
	_, err := b.Get(ctx(t), "no/such/key")
	wantKind(t, "Get of a missing key", err, blob.ErrNotFound)
	var be *blob.Error
	if !errors.As(err, &be) || be.Key != "no/such/key" {
		t.Fatalf("error %v does not carry the key", err)
	}
	_, err = b.NewRangeReader(ctx(t), "no/such/key", 0, 10)
	wantKind(t, "NewRangeReader of a missing key", err, blob.ErrNotFound)
	_, err = b.Attributes(ctx(t), "no/such/key")
	wantKind(t, "Attributes of a missing key", err, blob.ErrNotFound)
}

func testRoundTrip(t *testing.T, b blob.Bucket) {
	// Sizes on both sides of the S3 backend's single-request limit (4 MiB)
	// and beyond a part of its multipart uploads (5 MiB).
	for _, size := range []int{0, 1, 1000, 3<<20 + 17, 4 << 20, 4<<20 + 1, 11<<20 + 5} {
		key := fmt.Sprintf("rt/obj-%d", size)
		data := randomBytes(size)
		put(t, b, key, data)
		got, err := b.Get(ctx(t), key)
		if err != nil {
			t.Fatalf("Get(%q): %v", key, err)
		}
		if !bytes.Equal(got, data) {
			t.Fatalf("Get(%q): %d bytes differ from the %d written", key, len(got), len(data))
		}
	}
}

func testPutReplaces(t *testing.T, b blob.Bucket) {
	put(t, b, "k", randomBytes(5000))
	second := []byte("short")
	put(t, b, "k", second)
	got, err := b.Get(ctx(t), "k")
	if err != nil || !bytes.Equal(got, second) {
		t.Fatalf("after replacing: got %q, %v; want %q", got, err, second)
	}
}

// failingReader yields what r holds, then fails with err.
type failingReader struct {
	r   io.Reader
	err error
}

func (f *failingReader) Read(p []byte) (int, error) {
	n, err := f.r.Read(p)
	if err == io.EOF {
		return n, f.err
	}
	return n, err
}

func testPutReaderFails(t *testing.T, b blob.Bucket) {
	boom := errors.New("producer failed")
	for _, size := range []int{0, 1000, 6 << 20} {
		key := fmt.Sprintf("fail/obj-%d", size)
		err := b.Put(ctx(t), key, &failingReader{r: bytes.NewReader(randomBytes(size)), err: boom})
		if err == nil {
			t.Fatalf("Put(%q) of a reader failing after %d bytes succeeded", key, size)
		}
		_, err = b.Get(ctx(t), key)
		wantKind(t, fmt.Sprintf("Get after a failed Put of %d bytes", size), err, blob.ErrNotFound)
	}
}

func testPutIfAbsent(t *testing.T, b blob.Bucket) {
	first := []byte("first")
	if err := b.PutIfAbsent(ctx(t), "_versions/1", first); err != nil {
		t.Fatalf("first PutIfAbsent: %v", err)
	}
	err := b.PutIfAbsent(ctx(t), "_versions/1", []byte("second"))
	wantKind(t, "second PutIfAbsent", err, blob.ErrExists)
	got, err := b.Get(ctx(t), "_versions/1")
	if err != nil || !bytes.Equal(got, first) {
		t.Fatalf("after a lost PutIfAbsent: got %q, %v; want %q", got, err, first)
	}
	// An object made by Put also blocks PutIfAbsent.
	put(t, b, "plain", []byte("x"))
	wantKind(t, "PutIfAbsent over Put", b.PutIfAbsent(ctx(t), "plain", []byte("y")), blob.ErrExists)
}

func testRangeReads(t *testing.T, b blob.Bucket) {
	data := randomBytes(100_000)
	put(t, b, "r", data)
	cases := []struct{ off, n int64 }{{0, 10}, {10, 1}, {99_990, 10}, {50_000, -1}, {0, -1}, {99_999, 100}, {100_000, 10}}
	for _, c := range cases {
		rc, err := b.NewRangeReader(ctx(t), "r", c.off, c.n)
		if err != nil {
			t.Fatalf("NewRangeReader(%d, %d): %v", c.off, c.n, err)
		}
		got, err := io.ReadAll(rc)
		rc.Close()
		if err != nil {
			t.Fatalf("read range (%d, %d): %v", c.off, c.n, err)
		}
		end := int64(len(data))
		if c.n >= 0 && c.off+c.n < end {
			end = c.off + c.n
		}
		want := data[min(c.off, int64(len(data))):end]
		if !bytes.Equal(got, want) {
			t.Fatalf("range (%d, %d): got %d bytes, want %d", c.off, c.n, len(got), len(want))
		}
	}
}

func testReaderAt(t *testing.T, b blob.Bucket) {
	data := randomBytes(64 << 10)
	put(t, b, "ra", data)
	ra, err := blob.NewReaderAt(ctx(t), b, "ra")
	if err != nil {
		t.Fatal(err)
	}
	if ra.Size() != int64(len(data)) {
		t.Fatalf("Size = %d, want %d", ra.Size(), len(data))
	}
	p := make([]byte, 1000)
	if n, err := ra.ReadAt(p, 5000); err != nil || n != 1000 || !bytes.Equal(p, data[5000:6000]) {
		t.Fatalf("ReadAt(5000): n=%d err=%v", n, err)
	}
	n, err := ra.ReadAt(p, int64(len(data))-10)
	if n != 10 || err != io.EOF || !bytes.Equal(p[:10], data[len(data)-10:]) {
		t.Fatalf("ReadAt at the tail: n=%d err=%v, want 10, EOF", n, err)
	}
}

func testAttributes(t *testing.T, b blob.Bucket) {
	before := time.Now().Add(-time.Minute)
	put(t, b, "a/b", randomBytes(1234))
	a, err := b.Attributes(ctx(t), "a/b")
	if err != nil {
		t.Fatal(err)
	}
	if a.Size != 1234 {
		t.Fatalf("Size = %d, want 1234", a.Size)
	}
	if a.ModTime.Before(before) || a.ModTime.After(time.Now().Add(time.Minute)) {
		t.Fatalf("ModTime %v is not about now", a.ModTime)
	}
}

func testDelete(t *testing.T, b blob.Bucket) {
	put(t, b, "d/x", []byte("x"))
	if err := b.Delete(ctx(t), "d/x"); err != nil {
		t.Fatal(err)
	}
	_, err := b.Get(ctx(t), "d/x")
	wantKind(t, "Get after Delete", err, blob.ErrNotFound)
	// A deleted key can be created again conditionally.
	if err := b.PutIfAbsent(ctx(t), "d/x", []byte("y")); err != nil {
		t.Fatalf("PutIfAbsent after Delete: %v", err)
	}
}

// testDeleteAll deletes more keys than one batch takes, some missing,
// and leaves the keys beside them; where the store deletes many keys a
// request, it takes one request a batch.
func testDeleteAll(t *testing.T, b blob.Bucket) {
	n := blob.MaxDeleteBatch + 5
	keys := make([]string, 0, n+1)
	for i := range n {
		keys = append(keys, keyOf("da/x/", i))
	}
	var wg sync.WaitGroup
	sem := make(chan struct{}, 32)
	errs := make([]error, len(keys))
	for i, k := range keys {
		if i%100 == 7 {
			continue // missing: no error
		}
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			errs[i] = b.PutIfAbsent(ctx(t), k, []byte{byte(i)})
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	put(t, b, "da/keep", []byte("k"))
	put(t, b, "da/xk", []byte("k")) // a key the others have as a prefix but the "/"
	before, counted := blob.StatsOf(b)
	if err := blob.DeleteAll(ctx(t), b, keys); err != nil {
		t.Fatalf("DeleteAll of %d keys: %v", len(keys), err)
	}
	if left := listAll(t, b, "da/x/", 0); len(left) != 0 {
		t.Fatalf("%d of %d keys left after DeleteAll, the first %q", len(left), len(keys), left[0])
	}
	for _, k := range []string{"da/keep", "da/xk"} {
		if _, err := b.Get(ctx(t), k); err != nil {
			t.Fatalf("%s, not among the keys deleted: %v", k, err)
		}
	}
	if after, _ := blob.StatsOf(b); counted && blob.CanDeleteBatch(ctx(t), b) {
		if got := after.Deletes - before.Deletes; got != 2 {
			t.Fatalf("%d delete requests for %d keys, want 2 (batches of %d)", got, len(keys), blob.MaxDeleteBatch)
		}
	}
	if err := blob.DeleteAll(ctx(t), b, nil); err != nil {
		t.Fatalf("DeleteAll of no key: %v", err)
	}
}

func listAll(t *testing.T, b blob.Bucket, prefix string, pageSize int) []string {
	t.Helper()
	var keys []string
	for o, err := range blob.List(ctx(t), b, prefix, pageSize) {
		if err != nil {
			t.Fatalf("List(%q): %v", prefix, err)
		}
		keys = append(keys, o.Key)
	}
	return keys
}

// Keys whose byte order differs from a naive folder walk: '-' and '.' sort
// before '/', which sorts before letters.
var orderKeys = []string{"a/b", "a-c", "a.b", "a/c/d", "a/a", "b", "ab/c", "_versions/00000000000000000003.manifest",
	"_versions/00000000000000000002.manifest", "_versions/00000000000000000010.manifest"}

func testListOrder(t *testing.T, b blob.Bucket) {
	for _, k := range orderKeys {
		put(t, b, k, []byte(k))
	}
	want := slices.Clone(orderKeys)
	sort.Strings(want)
	if got := listAll(t, b, "", 0); !slices.Equal(got, want) {
		t.Fatalf("List(\"\") = %q\nwant %q", got, want)
	}
	if got, want := listAll(t, b, "a/", 0), []string{"a/a", "a/b", "a/c/d"}; !slices.Equal(got, want) {
		t.Fatalf("List(\"a/\") = %q, want %q", got, want)
	}
	if got, want := listAll(t, b, "a", 0), []string{"a-c", "a.b", "a/a", "a/b", "a/c/d", "ab/c"}; !slices.Equal(got, want) {
		t.Fatalf("List(\"a\") = %q, want %q", got, want)
	}
	if got := listAll(t, b, "zzz/", 0); len(got) != 0 {
		t.Fatalf("List of an empty prefix = %q", got)
	}
	page, err := b.ListPage(ctx(t), "_versions/", "", 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Objects) != 1 || page.Objects[0].Key != "_versions/00000000000000000002.manifest" || page.Next == "" {
		t.Fatalf("first page of one = %+v, want the smallest manifest name and a next token", page)
	}
	if page.Objects[0].Size != int64(len(page.Objects[0].Key)) {
		t.Fatalf("listed size %d, want %d", page.Objects[0].Size, len(page.Objects[0].Key))
	}
}

func testListPaging(t *testing.T, b blob.Bucket) {
	var want []string
	for i := range 53 {
		k := fmt.Sprintf("p/%d/obj-%03d", i%4, i)
		want = append(want, k)
		put(t, b, k, nil)
	}
	sort.Strings(want)
	for _, size := range []int{1, 2, 7, 1000} {
		if got := listAll(t, b, "p/", size); !slices.Equal(got, want) {
			t.Fatalf("pages of %d: %d keys %q\nwant %d", size, len(got), got, len(want))
		}
		page, err := b.ListPage(ctx(t), "p/", "", size)
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Objects) > size {
			t.Fatalf("page of %d holds %d objects", size, len(page.Objects))
		}
	}
}

// listDirAll lists one level of prefix in pages of pageSize, checking
// each page's size and that entries come in ascending order, each once.
func listDirAll(t *testing.T, b blob.Bucket, opts Options, prefix string, pageSize int) (objects, folders []string) {
	t.Helper()
	token, last := "", ""
	for {
		page, err := b.ListDir(ctx(t), prefix, token, pageSize)
		if err != nil {
			t.Fatalf("ListDir(%q, %q): %v", prefix, token, err)
		}
		n := len(page.Objects) + len(page.Folders)
		if opts.FoldersOverPage {
			n = len(page.Objects)
		}
		if pageSize > 0 && n > pageSize {
			t.Fatalf("ListDir(%q): a page of %d holds %d entries", prefix, pageSize, len(page.Objects)+len(page.Folders))
		}
		var keys []string
		for _, o := range page.Objects {
			if o.Size != int64(len(o.Key)) {
				t.Fatalf("ListDir(%q): %q listed with size %d, want %d", prefix, o.Key, o.Size, len(o.Key))
			}
			objects, keys = append(objects, o.Key), append(keys, o.Key)
		}
		for _, f := range page.Folders {
			if !strings.HasSuffix(f, "/") {
				t.Fatalf("ListDir(%q): folder %q does not end in /", prefix, f)
			}
			folders, keys = append(folders, f), append(keys, f)
		}
		slices.Sort(keys)
		for _, k := range keys {
			if k <= last {
				t.Fatalf("ListDir(%q) in pages of %d: %q after %q", prefix, pageSize, k, last)
			}
			last = k
		}
		if page.Next == "" {
			return objects, folders
		}
		token = page.Next
	}
}

// Keys for one-level listings: objects beside folders whose names sort
// around them ('-' and '.' before '/'), folders holding deeper folders,
// and a folder named like a table's own.
var dirKeys = []string{"a/b", "a-c", "a.b", "a/c/d", "a/c/e/f", "a/a", "b", "ab/c",
	"_versions/00000000000000000003.manifest", "_versions/00000000000000000002.manifest",
	"_versions/_versions/00000000000000000001.manifest", "_versions/data/x.parquet"}

func testListDir(t *testing.T, b blob.Bucket, opts Options) {
	for _, k := range dirKeys {
		put(t, b, k, []byte(k))
	}
	cases := []struct {
		prefix           string
		objects, folders []string
	}{
		{"", []string{"a-c", "a.b", "b"}, []string{"_versions/", "a/", "ab/"}},
		{"a/", []string{"a/a", "a/b"}, []string{"a/c/"}},
		{"a/c/", []string{"a/c/d"}, []string{"a/c/e/"}},
		{"_versions/", []string{"_versions/00000000000000000002.manifest", "_versions/00000000000000000003.manifest"},
			[]string{"_versions/_versions/", "_versions/data/"}},
		{"zzz/", nil, nil},
	}
	for _, c := range cases {
		objects, folders := listDirAll(t, b, opts, c.prefix, 0)
		if !slices.Equal(objects, c.objects) || !slices.Equal(folders, c.folders) {
			t.Fatalf("ListDir(%q) = objects %q, folders %q; want %q, %q", c.prefix, objects, folders, c.objects, c.folders)
		}
	}
	// One entry: the smallest name, a manifest's before the folders.
	page, err := b.ListDir(ctx(t), "_versions/", "", 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Folders) != 0 && !opts.FoldersOverPage || len(page.Objects) != 1 || page.Objects[0].Key != "_versions/00000000000000000002.manifest" || page.Next == "" {
		t.Fatalf("first entry of _versions/ = %+v, want the smallest manifest name and a next token", page)
	}
	for _, bad := range []string{"a", "a//", "../"} {
		_, err := b.ListDir(ctx(t), bad, "", 0)
		wantKind(t, fmt.Sprintf("ListDir(%q)", bad), err, blob.ErrPermanent)
	}
}

func testListDirPaging(t *testing.T, b blob.Bucket, opts Options) {
	var objects, folders []string
	for i := range 23 {
		k := fmt.Sprintf("p/f%02d/k", i)
		if i%3 == 0 {
			k = fmt.Sprintf("p/o%02d", i)
			objects = append(objects, k)
		} else {
			folders = append(folders, fmt.Sprintf("p/f%02d/", i))
			// Many keys below a folder: it is still one entry.
			for j := range i % 4 {
				put(t, b, fmt.Sprintf("p/f%02d/deep/%d", i, j), []byte(fmt.Sprintf("p/f%02d/deep/%d", i, j)))
			}
		}
		put(t, b, k, []byte(k))
	}
	for _, size := range []int{1, 2, 7, 1000} {
		gotO, gotF := listDirAll(t, b, opts, "p/", size)
		if !slices.Equal(gotO, objects) || !slices.Equal(gotF, folders) {
			t.Fatalf("pages of %d: objects %q folders %q\nwant %q %q", size, gotO, gotF, objects, folders)
		}
	}
}

func testInvalidKeys(t *testing.T, b blob.Bucket) {
	for _, k := range []string{"", "../x", "a/../../x", "a//b", "/a", "a/", ".", "a\\b"} {
		_, err := b.Get(ctx(t), k)
		wantKind(t, fmt.Sprintf("Get(%q)", k), err, blob.ErrPermanent)
		err = b.PutIfAbsent(ctx(t), k, []byte("x"))
		wantKind(t, fmt.Sprintf("PutIfAbsent(%q)", k), err, blob.ErrPermanent)
	}
}

func testCanceled(t *testing.T, b blob.Bucket) {
	c, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := b.Get(c, "x"); !errors.Is(err, context.Canceled) {
		t.Fatalf("Get with a canceled context: %v", err)
	}
	if err := b.PutIfAbsent(c, "x", []byte("x")); !errors.Is(err, context.Canceled) {
		t.Fatalf("PutIfAbsent with a canceled context: %v", err)
	}
}

func testRace(t *testing.T, b blob.Bucket, rounds int) {
	const racers = 32
	for round := range rounds {
		key := fmt.Sprintf("race/round-%03d", round)
		errs := make([]error, racers)
		var start, wg sync.WaitGroup
		start.Add(1)
		for i := range racers {
			wg.Go(func() {
				start.Wait()
				errs[i] = b.PutIfAbsent(ctx(t), key, fmt.Appendf(nil, "racer-%02d", i))
			})
		}
		start.Done()
		wg.Wait()
		winner := -1
		for i, err := range errs {
			switch {
			case err == nil:
				if winner >= 0 {
					t.Fatalf("round %d: racers %d and %d both won %q", round, winner, i, key)
				}
				winner = i
			case !errors.Is(err, blob.ErrExists):
				t.Fatalf("round %d: racer %d: %v", round, i, err)
			}
		}
		if winner < 0 {
			t.Fatalf("round %d: no racer won %q", round, key)
		}
		got, err := b.Get(ctx(t), key)
		if want := fmt.Sprintf("racer-%02d", winner); err != nil || string(got) != want {
			t.Fatalf("round %d: %q holds %q (%v), want the winner's %q", round, key, got, err, want)
		}
	}
}

func testSelfTest(t *testing.T, b blob.Bucket) {
	rep, err := blob.SelfTest(ctx(t), b, 16)
	if err != nil {
		t.Fatalf("SelfTest: %v (%+v)", err, rep)
	}
	if rep.Winners != 1 || rep.Losers != 15 {
		t.Fatalf("SelfTest report %+v", rep)
	}
	if keys := listAll(t, b, "_selftest/", 0); len(keys) != 0 {
		t.Fatalf("SelfTest left %q behind", keys)
	}
}

// keyOf is used by the process race; exported through RaceKey for tests.
func keyOf(prefix string, i int) string {
	return fmt.Sprintf("%s/k%04d", strings.TrimSuffix(prefix, "/"), i)
}
