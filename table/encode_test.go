package table_test

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"

	"github.com/stratadb/strata/table/format"
)

// withFragments returns a copy of m holding n fragments made from its
// first one, each with an id and a key of its own.
func withFragments(m *format.Manifest, n int) *format.Manifest {
	c := *m
	c.Fragments = make([]format.Fragment, 0, n) // read back as [], never null
	for i := range n {
		f := m.Fragments[0]
		f.ID, f.Key = uint64(i), fmt.Sprintf("data/f%04d.parquet", i)
		c.Fragments = append(c.Fragments, f)
	}
	c.NextFragmentID = uint64(n) + 1
	return &c
}

// sameManifest fails unless data decodes to m, state and transaction, and
// the transaction reads alone as m's.
func sameManifest(t *testing.T, what string, m *format.Manifest, data []byte) {
	t.Helper()
	key := format.ManifestKey(m.Version)
	got, err := format.DecodeManifest(key, data)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	want, _ := json.Marshal(m)
	have, _ := json.Marshal(got)
	if !bytes.Equal(want, have) {
		t.Fatalf("%s: decoded state differs:\n got %s\nwant %s", what, have, want)
	}
	txn, err := format.DecodeTransaction(key, data)
	if err != nil {
		t.Fatalf("%s: transaction: %v", what, err)
	}
	wantTxn, _ := json.Marshal(&m.Transaction)
	for name, tx := range map[string]*format.Transaction{"read alone": txn, "read with the state": &got.Transaction} {
		if haveTxn, _ := json.Marshal(tx); !bytes.Equal(wantTxn, haveTxn) {
			t.Fatalf("%s: transaction %s differs:\n got %s\nwant %s", what, name, haveTxn, wantTxn)
		}
	}
}

// A manifest's payload is stored as zstd frames one after another; a
// standard streaming decoder reads them as one payload, and Strata reads
// back every state, at and around each frame's boundary of entries.
func TestManifestFramesRoundTripAtEveryChunkBoundary(t *testing.T) {
	_, _, base := latestManifestBytes(t)
	for _, n := range []int{0, 1, 31, 32, 33, 64, 65, 100} {
		m := withFragments(base, n)
		data, err := format.EncodeManifest(m)
		if err != nil {
			t.Fatal(err)
		}
		sameManifest(t, fmt.Sprintf("%d fragments", n), m, data)
		// The payload as any zstd reader sees it: the length, the
		// transaction, and the state as one JSON document.
		zr, err := zstd.NewReader(bytes.NewReader(data[28:]))
		if err != nil {
			t.Fatal(err)
		}
		payload, err := io.ReadAll(zr)
		zr.Close()
		if err != nil {
			t.Fatalf("%d fragments: a streaming decoder: %v", n, err)
		}
		tl := binary.LittleEndian.Uint32(payload)
		var state format.Manifest
		if err := json.Unmarshal(payload[4+tl:], &state); err != nil || len(state.Fragments) != n {
			t.Fatalf("%d fragments: the state as one document: %d fragments, %v", n, len(state.Fragments), err)
		}
	}
}

// The frames of whole chunks are cached; every change a commit makes to
// the entries (a deletion vector, a fragment taken out, an id given again
// on a rebase, a fragment added) must reach the object all the same.
func TestManifestChunkCacheFollowsEveryChange(t *testing.T) {
	_, _, base := latestManifestBytes(t)
	m := withFragments(base, 100)
	steps := []struct {
		what   string
		change func(m *format.Manifest)
	}{
		{"as it is", func(*format.Manifest) {}},
		{"a deletion vector on fragment 40", func(m *format.Manifest) {
			m.Fragments[40].Deletion = &format.Deletion{Key: "deletions/40-7.bin", Count: 3}
		}},
		{"the deletion vector grown", func(m *format.Manifest) { m.Fragments[40].Deletion.Count = 5 }},
		{"fragment 10 taken out", func(m *format.Manifest) { m.Fragments = slices.Delete(m.Fragments, 10, 11) }},
		{"the last fragment given a new id", func(m *format.Manifest) {
			m.Fragments[len(m.Fragments)-1].ID = m.NextFragmentID
			m.NextFragmentID++
		}},
		{"a fragment appended", func(m *format.Manifest) {
			f := m.Fragments[0]
			f.ID, f.Key = m.NextFragmentID, "data/appended.parquet"
			m.Fragments = append(m.Fragments, f)
			m.NextFragmentID++
		}},
		{"a fragment's size in a cached chunk", func(m *format.Manifest) { m.Fragments[3].Bytes += 11 }},
	}
	for _, s := range steps {
		s.change(m)
		data, err := format.EncodeManifest(m)
		if err != nil {
			t.Fatal(err)
		}
		sameManifest(t, s.what, m, data)
	}
}

// Manifests written before the payload was split into frames (one frame)
// read as they did.
func TestOneFrameManifestsStillRead(t *testing.T) {
	_, _, base := latestManifestBytes(t)
	m := withFragments(base, 70)
	txn, _ := json.Marshal(&m.Transaction)
	state, _ := json.Marshal(m)
	payload := binary.LittleEndian.AppendUint32(nil, uint32(len(txn)))
	payload = append(append(payload, txn...), state...)
	enc, _ := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest))
	comp := enc.EncodeAll(payload, nil)
	sameManifest(t, "one frame", m, manifestObject(comp, 1))
}

// FuzzDecodeManifestFrames wraps fuzzed bytes as a compressed payload with
// a valid header and checksum, so that reading its frames — whole, or the
// transaction's alone — meets whatever a damaged object could hold.
func FuzzDecodeManifestFrames(f *testing.F) {
	_, _, base := latestManifestBytes(f)
	data, err := format.EncodeManifest(withFragments(base, 40))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(data[28:])
	f.Add(data[28 : 28+len(data[28:])/2])
	f.Add([]byte{0x28, 0xb5, 0x2f, 0xfd})
	f.Fuzz(func(t *testing.T, payload []byte) {
		d := manifestObject(payload, 1)
		m, err := format.DecodeManifest("_versions/x.manifest", d)
		if err == nil && m.Schema() == nil {
			t.Fatal("decoded a manifest without a schema")
		}
		if err != nil && !errors.Is(err, format.ErrCorrupt) {
			t.Fatalf("untyped error %v", err)
		}
		if _, err := format.DecodeTransaction("_versions/x.manifest", d); err != nil && !errors.Is(err, format.ErrCorrupt) {
			t.Fatalf("untyped error reading the transaction: %v", err)
		}
	})
}

// A frame header that claims far more than its payload could hold is
// damage: it is refused as such, before anything the size of the claim is
// allocated.
func TestManifestFrameClaimingTooMuchIsCorrupt(t *testing.T) {
	frame := []byte{0x28, 0xb5, 0x2f, 0xfd, // magic
		0xe0,                      // one segment, an 8-byte content size
		0, 0, 0, 0x10, 0, 0, 0, 0, // content size: 256 MiB
		0x09, 0, 0, 'x', // the last block: raw, one byte
	}
	d := manifestObject(frame, 1)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := format.DecodeManifest("_versions/x.manifest", d)
	_, terr := format.DecodeTransaction("_versions/x.manifest", d)
	runtime.ReadMemStats(&after)
	for _, err := range []error{err, terr} {
		if !errors.Is(err, format.ErrCorrupt) || !strings.Contains(err.Error(), "claims 268435456 bytes") {
			t.Fatalf("a frame claiming 256 MiB in %d bytes: %v, want a CorruptError naming the claim", len(frame), err)
		}
	}
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 16<<20 {
		t.Fatalf("reading it allocated %d bytes", grew)
	}
}
