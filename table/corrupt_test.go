package table_test

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"hash/crc32"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/table"
	"github.com/stratadb/strata/table/format"
)

func latestManifestBytes(t testing.TB) (string, []byte, *format.Manifest) {
	b := memBucket(t)
	newTable(t, b, 2, 10)
	s, err := table.Open(ctx, b, nil)
	if err != nil {
		t.Fatal(err)
	}
	key := format.ManifestKey(s.Version())
	data, err := b.Get(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	return key, data, s.Manifest()
}

func TestManifestRoundTrips(t *testing.T) {
	key, data, m := latestManifestBytes(t)
	got, err := format.DecodeManifest(key, data)
	if err != nil {
		t.Fatal(err)
	}
	if got.Version != m.Version || got.TableID != m.TableID || len(got.Fragments) != 2 || got.Schema() == nil ||
		got.Fragments[1].Stats("id").Max.I != 19 || got.Transaction.CommitID != m.Transaction.CommitID {
		t.Fatalf("decoded %+v", got)
	}
}

func TestDamagedManifestsAreCorruptErrorsNamingTheKey(t *testing.T) {
	key, data, _ := latestManifestBytes(t)
	flip := bytes.Clone(data)
	flip[len(flip)/2] ^= 0x40
	badMagic := bytes.Clone(data)
	copy(badMagic, "NOTAMANI")
	cases := map[string][]byte{
		"empty":        {},
		"truncated":    data[:len(data)-7],
		"header only":  data[:28],
		"flipped byte": flip,
		"bad magic":    badMagic,
		"not ours":     []byte(strings.Repeat("{}", 40)),
	}
	for name, d := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := format.DecodeManifest(key, d)
			var ce *format.CorruptError
			if !errors.Is(err, format.ErrCorrupt) || !errors.As(err, &ce) || ce.Key != key {
				t.Fatalf("got %v, want a CorruptError naming %s", err, key)
			}
		})
	}
}

func TestNewerMajorFormatIsRefusedClearly(t *testing.T) {
	key, data, _ := latestManifestBytes(t)
	d := bytes.Clone(data)
	binary.LittleEndian.PutUint16(d[8:], format.FormatEvolved+1)
	_, err := format.DecodeManifest(key, d)
	if !errors.Is(err, format.ErrUnsupportedFormat) || !strings.Contains(err.Error(), key) {
		t.Fatalf("got %v", err)
	}
}

func TestCorruptFragmentIsATypedErrorNamingTheObject(t *testing.T) {
	b := memBucket(t)
	newTable(t, b, 3, 10)
	s, err := table.Open(ctx, b, nil)
	if err != nil {
		t.Fatal(err)
	}
	victim := s.Manifest().Fragments[1]
	data, err := b.Get(ctx, victim.Key)
	if err != nil {
		t.Fatal(err)
	}
	garbage := bytes.Repeat([]byte{0xAB}, len(data)) // same size, nothing readable
	scanFindsCorrupt(t, b, s, victim.Key, garbage, "a damaged fragment")
	scanFindsCorrupt(t, b, s, victim.Key, data[:len(data)/2], "a truncated fragment")
}

// scanFindsCorrupt replaces object key with data, then fails unless a
// scan of s fails with a CorruptError naming key.
func scanFindsCorrupt(t *testing.T, b blob.Bucket, s *table.Snapshot, key string, data []byte, what string) {
	t.Helper()
	scanWithFindsCorrupt(t, b, s, table.ScanOptions{}, key, data, what)
}

// scanWithFindsCorrupt is scanFindsCorrupt for a scan with opts.
func scanWithFindsCorrupt(t *testing.T, b blob.Bucket, s *table.Snapshot, opts table.ScanOptions, key string, data []byte, what string) {
	t.Helper()
	if err := b.Delete(ctx, key); err != nil {
		t.Fatal(err)
	}
	if err := b.PutIfAbsent(ctx, key, data); err != nil {
		t.Fatal(err)
	}
	var got error
	for _, err := range s.Scan(ctx, opts) {
		if err != nil {
			got = err
		}
	}
	var ce *format.CorruptError
	if !errors.As(got, &ce) || ce.Key != key {
		t.Fatalf("scan of %s: %v, want a CorruptError naming %s", what, got, key)
	}
}

func FuzzDecodeManifest(f *testing.F) {
	b := memBucket(f)
	newTable(f, b, 2, 5)
	s, _ := table.Open(ctx, b, nil)
	data, _ := b.Get(ctx, format.ManifestKey(s.Version()))
	f.Add(data)
	f.Add(data[:40])
	f.Add([]byte("STRATAMF"))
	f.Fuzz(func(t *testing.T, d []byte) {
		m, err := format.DecodeManifest("_versions/x.manifest", d)
		if err == nil && m.Schema() == nil {
			t.Fatal("decoded a manifest without a schema")
		}
		if err != nil && !errors.Is(err, format.ErrCorrupt) && !errors.Is(err, format.ErrUnsupportedFormat) {
			t.Fatalf("untyped error %v", err)
		}
	})
}

// FuzzDecodeManifestPayload wraps fuzzed JSON in a valid header and
// checksum, so the decoder's checks past the checksum are exercised.
func FuzzDecodeManifestPayload(f *testing.F) {
	// A real version's payload, so that mutations reach the schema it
	// keeps (schema_ipc) and the fragment entries.
	b := memBucket(f)
	newTable(f, b, 2, 5)
	s, _ := table.Open(ctx, b, nil)
	obj, err := b.Get(ctx, format.ManifestKey(s.Version()))
	if err != nil {
		f.Fatal(err)
	}
	dec, _ := zstd.NewReader(nil)
	defer dec.Close()
	real, err := dec.DecodeAll(obj[28:], nil) // past the header: the zstd-compressed payload
	if err != nil {
		f.Fatal(err)
	}
	if _, err := format.DecodeManifest("_versions/x.manifest", manifestObject(real, 0)); err != nil {
		f.Fatalf("a real version's payload: %v", err)
	}
	f.Add(real)
	f.Add([]byte(`{"table_id":"t","version":1,"schema_ipc":"AAAA","fragments":[{"id":0}],"next_fragment_id":0}`))
	f.Add([]byte(`{"table_id":"t","version":1,"fragments":[{"id":1,"rows":-1}],"next_fragment_id":5}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, payload []byte) {
		d := manifestObject(payload, 0)
		m, err := format.DecodeManifest("_versions/x.manifest", d)
		if err == nil && m.Schema() == nil {
			t.Fatal("decoded a manifest without a schema")
		}
		if err != nil && !errors.Is(err, format.ErrCorrupt) {
			t.Fatalf("untyped error %v", err)
		}
	})
}

func TestCachedStateEncodingEqualsPlainJSON(t *testing.T) {
	key, data, m := latestManifestBytes(t)
	again, err := format.EncodeManifest(m)
	if err != nil {
		t.Fatal(err)
	}
	got, err := format.DecodeManifest(key, again)
	if err != nil {
		t.Fatal(err)
	}
	orig, err := format.DecodeManifest(key, data)
	if err != nil {
		t.Fatal(err)
	}
	a, err := json.Marshal(orig)
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(got)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a, b) {
		t.Fatalf("re-encoding with the fragment cache changed the manifest:\n%s\n%s", a, b)
	}
}

// Two tables in one process may hold fragments with the same relative key
// and id but other contents; the encoder's cache must not mix them up.
func TestEncodingCacheKeepsTablesApart(t *testing.T) {
	_, _, m1 := latestManifestBytes(t)
	_, _, m2 := latestManifestBytes(t)
	m2.Fragments[0].Key = m1.Fragments[0].Key
	m2.Fragments[0].Bytes = m1.Fragments[0].Bytes + 37
	if _, err := format.EncodeManifest(m1); err != nil {
		t.Fatal(err)
	}
	data, err := format.EncodeManifest(m2)
	if err != nil {
		t.Fatal(err)
	}
	got, err := format.DecodeManifest(format.ManifestKey(m2.Version), data)
	if err != nil {
		t.Fatal(err)
	}
	if got.Fragments[0].Bytes != m2.Fragments[0].Bytes {
		t.Fatalf("fragment bytes %d, want %d: the cache served another table's entry", got.Fragments[0].Bytes, m2.Fragments[0].Bytes)
	}
}

// A deletion vector or key index whose header claims 2^62 entries over an
// empty body is a CorruptError naming it. The size check multiplied the
// count, which wrapped to the body's size: the decoder then allocated
// 2^62 entries and panicked.
func TestDeletionVectorsAndIndexesClaimingTooMuchAreCorrupt(t *testing.T) {
	dv := format.EncodeDeletions(nil)
	binary.LittleEndian.PutUint64(dv[12:], 1<<62)
	_, err := format.DecodeDeletions("deletions/1-2.bin", dv)
	var ce *format.CorruptError
	if !errors.As(err, &ce) || ce.Key != "deletions/1-2.bin" {
		t.Fatalf("deletion vector: %v, want a CorruptError naming it", err)
	}
	ix := table.EncodeIndex(nil)
	binary.LittleEndian.PutUint64(ix[12:], 1<<62)
	_, err = table.DecodeIndex("_indexes/id-3.idx", ix)
	if !errors.As(err, &ce) || ce.Key != "_indexes/id-3.idx" {
		t.Fatalf("key index: %v, want a CorruptError naming it", err)
	}
}

// A key index whose entries are out of order, checksum and all, is
// corrupt: a lookup's binary search would miss keys it holds.
func TestAnIndexOutOfOrderIsCorrupt(t *testing.T) {
	ix := table.EncodeIndex([]table.IndexEntry{{Key: 1, Fragment: 1}, {Key: 2, Fragment: 1}})
	body := ix[24:]
	binary.LittleEndian.PutUint64(body[0:], 3) // keys 3, 2
	binary.LittleEndian.PutUint32(ix[20:], crc32.Checksum(body, crc32.MakeTable(crc32.Castagnoli)))
	if _, err := table.DecodeIndex("_indexes/id-3.idx", ix); !errors.Is(err, format.ErrCorrupt) {
		t.Fatalf("%v, want ErrCorrupt", err)
	}
}

// FuzzDecodeDeletions: any object is a typed error, or a vector that
// encodes back to the same bytes.
func FuzzDecodeDeletions(f *testing.F) {
	f.Add(format.EncodeDeletions([]uint32{1, 5, 9}))
	f.Add(format.EncodeDeletions(nil))
	f.Fuzz(func(t *testing.T, d []byte) {
		rows, err := format.DecodeDeletions("deletions/x.bin", d)
		decodesBack(t, d, err, func() []byte { return format.EncodeDeletions(rows) })
	})
}

// FuzzDecodeIndex: any object is a typed error, or entries that encode
// back to the same bytes.
func FuzzDecodeIndex(f *testing.F) {
	f.Add(table.EncodeIndex([]table.IndexEntry{{Key: 1, Fragment: 2, Offset: 3}, {Key: 1, Fragment: 4}, {Key: 9, Fragment: 2, Offset: 7}}))
	f.Add(table.EncodeIndex(nil))
	f.Fuzz(func(t *testing.T, d []byte) {
		entries, err := table.DecodeIndex("_indexes/x.idx", d)
		decodesBack(t, d, err, func() []byte { return table.EncodeIndex(entries) })
	})
}

// FuzzDecodeHashIndex: any object is a typed error, or entries that
// encode back to the same bytes.
func FuzzDecodeHashIndex(f *testing.F) {
	var many []table.HashEntry
	for i := range 300 {
		many = append(many, table.HashEntry{Key: []byte{byte(i), byte(i >> 8)}, Fragment: uint64(i % 7), Offset: uint32(i)})
	}
	for _, es := range [][]table.HashEntry{nil, {{Key: []byte("a"), Fragment: 2, Offset: 3}, {Key: []byte("a"), Fragment: 1}, {Key: nil, Fragment: 4}}, many} {
		d, _, _ := table.EncodeHashIndex(es)
		f.Add(d)
	}
	f.Fuzz(func(t *testing.T, d []byte) {
		entries, err := table.DecodeHashIndex("_indices/x/index.bin", d)
		decodesBack(t, d, err, func() []byte { out, _, _ := table.EncodeHashIndex(entries); return out })
	})
}

// decodesBack fails unless decoding object d gave a typed error (err), or
// what encodes back to d.
func decodesBack(t *testing.T, d []byte, err error, encode func() []byte) {
	t.Helper()
	if err != nil {
		if !errors.Is(err, format.ErrCorrupt) && !errors.Is(err, format.ErrUnsupportedFormat) {
			t.Fatalf("untyped error %v", err)
		}
		return
	}
	if !bytes.Equal(encode(), d) {
		t.Fatal("what decoded does not encode back to the object")
	}
}
