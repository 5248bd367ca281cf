package rollouts

import (
	"encoding/hex"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"
)

func TestRowZeroMatchesTheWorkload(t *testing.T) {
	r := Generate(42, 0, 0)
	if r.Reward != 0.657087276732245 {
		t.Errorf("reward = %v, want 0.657087276732245", r.Reward)
	}
	if !strings.HasPrefix(r.Prompt, "zulu whiskey island stone batch") || len(r.Prompt) != 256 {
		t.Errorf("prompt = %q (%d bytes)", r.Prompt[:40], len(r.Prompt))
	}
	if got := hex.EncodeToString(r.Artifact[:8]); got != "0da27eee4708f9d0" {
		t.Errorf("artifact starts %s, want 0da27eee4708f9d0", got)
	}
}

func TestDefaultIngestDigest(t *testing.T) {
	d := NewDigest()
	for w := range 4 {
		for seq := range int64(50 * 200) {
			d.Add(Generate(42, w, seq))
		}
	}
	if got, want := d.Sum(), "ecd817d2beda56a1cc6746b3bd23ace5b8a53069b0ca4053f88e626ed6b98329"; got != want {
		t.Fatalf("digest %s, want %s", got, want)
	}
}

func TestBatchRoundTripsRows(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	rec := Batch(mem, 42, 3, 10, 5)
	defer rec.Release()
	rows := RowsOf(rec)
	for i, r := range rows {
		want := Generate(42, 3, int64(10+i))
		if r.ID != want.ID || r.Prompt != want.Prompt || string(r.Artifact) != string(want.Artifact) || r.Reward != want.Reward {
			t.Fatalf("row %d differs", i)
		}
	}
}
