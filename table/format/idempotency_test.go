package format

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"
)

// The window of remembered appends (IdempotencyWindow, MaxProducers,
// RecentSeqs), pinned:
//   - a recorded name is found with its outcome; another digest is ErrKeyReused;
//   - a producer keeps its RecentSeqs highest sequence numbers, and a lower
//     one is ErrSequenceExpired, never taken for new;
//   - a sequence number between kept ones that was never stored is new
//     (appends may arrive out of order);
//   - a producer idle past the window, or the least recently active beyond
//     MaxProducers, is forgotten;
//   - Record does not change the records it is given (manifests share them).
func TestProducersRememberWithinTheirWindow(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	key := func(p string, seq uint64, d Digest, at time.Time) AppendKey {
		return AppendKey{Producer: ProducerID(p), Seq: seq, Digest: d, Time: at}
	}
	var p Producers
	p = p.Record(key("a", 1, 11, t0), 100, 5)
	if o, found, err := p.Lookup(key("a", 1, 11, t0)); !found || err != nil || o.At != 100 || o.Rows != 5 {
		t.Fatalf("recorded name: %+v %v %v", o, found, err)
	}
	if _, _, err := p.Lookup(key("a", 1, 12, t0)); !errors.Is(err, ErrKeyReused) {
		t.Fatalf("other digest: %v, want ErrKeyReused", err)
	}
	before := p
	for seq := uint64(2); seq <= 20; seq += 2 { // 2, 4, …, 20: the kept are 6…20
		p = p.Record(key("a", seq, Digest(seq), t0.Add(time.Duration(seq)*time.Second)), 100+seq, 1)
	}
	if len(before) != 1 || len(before[0].Recent) != 1 {
		t.Fatalf("Record changed the records it was given: %+v", before)
	}
	if got := len(p[0].Recent); got != RecentSeqs || p[0].Recent[0].Seq != 6 {
		t.Fatalf("kept %d outcomes from seq %d, want %d from 6", got, p[0].Recent[0].Seq, RecentSeqs)
	}
	if _, _, err := p.Lookup(key("a", 4, 4, t0)); !errors.Is(err, ErrSequenceExpired) {
		t.Fatalf("a sequence number below the kept ones: %v, want ErrSequenceExpired", err)
	}
	if _, found, err := p.Lookup(key("a", 7, 7, t0)); found || err != nil {
		t.Fatalf("a sequence number between kept ones, never stored: found %v, %v; want new", found, err)
	}
	if _, found, err := p.Lookup(key("a", 21, 21, t0)); found || err != nil {
		t.Fatalf("the next sequence number: found %v, %v; want new", found, err)
	}
	// An idle producer is forgotten once another records past its window.
	p = p.Record(key("b", 0, 1, t0.Add(IdempotencyWindow+10*time.Second)), 200, 1)
	if _, found, _ := p.Lookup(key("a", 20, 20, t0)); !found {
		t.Fatal("producer a forgotten while within its window (its last append was at t0+20s)")
	}
	p = p.Record(key("c", 0, 1, t0.Add(IdempotencyWindow+21*time.Second)), 201, 1)
	if _, found, _ := p.Lookup(key("a", 20, 20, t0)); found {
		t.Fatal("producer a remembered past its window")
	}
	// Beyond MaxProducers, the least recently active go first.
	for i := range MaxProducers + 10 {
		p = p.Record(key(fmt.Sprint("p", i), 0, 1, t0.Add(2*IdempotencyWindow+time.Duration(i)*time.Millisecond)), uint64(300+i), 1)
	}
	if len(p) != MaxProducers {
		t.Fatalf("%d producers kept, want %d", len(p), MaxProducers)
	}
	if _, found, _ := p.Lookup(key("p9", 0, 1, t0)); found {
		t.Fatal("p9, among the least recently active, kept")
	}
	if _, found, _ := p.Lookup(key("p10", 0, 1, t0)); !found {
		t.Fatal("p10 forgotten")
	}
	// Records read back from JSON are the same.
	data, err := json.Marshal(p[:2])
	if err != nil {
		t.Fatal(err)
	}
	var back Producers
	if err := json.Unmarshal(data, &back); err != nil || len(back) != 2 || back[1].Recent[0] != p[1].Recent[0] {
		t.Fatalf("JSON round trip: %v, %+v", err, back)
	}
}

func TestIdempotencyKeysAreChecked(t *testing.T) {
	for _, k := range []Idempotency{{}, {Producer: string(make([]byte, MaxProducerBytes+1))}} {
		if err := k.Check(); !errors.Is(err, ErrBadIdempotency) {
			t.Errorf("producer of %d bytes: %v, want ErrBadIdempotency", len(k.Producer), err)
		}
	}
	if err := (Idempotency{Producer: "x"}).Check(); err != nil {
		t.Fatal(err)
	}
	var d Digest
	if err := d.UnmarshalText([]byte("12")); err == nil {
		t.Fatal("a digest of 2 digits accepted")
	}
}

// A producer's sequence numbers fallen out of Recent stay installed,
// however they interleave with gaps (two replicas' shards each took every
// other one), within OlderSpan below the newest fallen out.
func TestTheOlderSequencesOfAProducerStayInstalled(t *testing.T) {
	now := time.Now()
	var p Producers
	stored := func(seq uint64) bool { return seq%2 == 1 || seq%10 == 4 }
	for seq := uint64(1); seq <= 3000; seq++ {
		if stored(seq) {
			p = p.Record(AppendKey{Producer: "c", Seq: seq, Digest: 1, Time: now}, seq, 1)
		}
	}
	rec := p[p.index("c")]
	if len(rec.Recent) != RecentSeqs || rec.Older == nil || len(rec.Older.Bits) > OlderSpan/8 {
		t.Fatalf("recent %d, older %+v", len(rec.Recent), rec.Older)
	}
	for seq := uint64(1); seq <= 3000; seq++ {
		want := stored(seq) && rec.Older.Top-min(seq, rec.Older.Top) <= OlderSpan
		if got := p.Installed(AppendKey{Producer: "c", Seq: seq, Digest: 1}); got != want {
			t.Fatalf("seq %d installed %v, want %v", seq, got, want)
		}
	}
	// Through JSON, as a manifest holds it.
	data, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	var back Producers
	if err := json.Unmarshal(data, &back); err != nil || !back.Installed(AppendKey{Producer: "c", Seq: 2991, Digest: 1}) ||
		back.Installed(AppendKey{Producer: "c", Seq: 2990, Digest: 1}) {
		t.Fatalf("%v: the record read back lost its older numbers", err)
	}
}

// A merge's named rows are marked dropped whatever order other producers'
// appends come in: copies of producer a's append 12 ms apart, with
// producer b's append two hours later between them in the merge's order,
// are one append, and the first alone is installed. Before, recording
// b's append applied the window at b's time and forgot a's record in the
// middle of the pass, so the second copy was installed too (a simulated
// retry through another replica, read three times). RecordNamed agrees
// with the marks, and applies the window once, at the newest time.
func TestANamedCopyIsDroppedWhateverOtherProducersCameBetween(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	named := []NamedRows{
		{AppendKey: AppendKey{Producer: "a", Seq: 5, Digest: 7, Time: t0}, Fragment: "f1", Rows: 2},
		{AppendKey: AppendKey{Producer: "b", Seq: 1, Digest: 9, Time: t0.Add(2 * time.Hour)}, Fragment: "f2", Rows: 3},
		{AppendKey: AppendKey{Producer: "a", Seq: 5, Digest: 7, Time: t0.Add(12 * time.Millisecond)}, Fragment: "f3", Rows: 2},
	}
	marked := Producers(nil).DropNamed(named)
	if marked[0].Dropped || marked[1].Dropped || !marked[2].Dropped {
		t.Fatalf("dropped %v %v %v, want only the second copy of a/5", marked[0].Dropped, marked[1].Dropped, marked[2].Dropped)
	}
	p, err := Producers(nil).RecordNamed(marked, 10, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	// The window applied at b's time: a, idle two hours, is forgotten.
	if p.index("a") >= 0 || p.index("b") < 0 {
		t.Fatalf("records after the merge: %+v", p)
	}
}

// The window of a name met in several shards counts from the merge that
// last met it, not from the append: two copies of an append made hours
// ago (a retry that reached two replicas whose shards merged late),
// merged a minute apart, are one append. Before, the first merge recorded
// the name at the append's time and the window, applied at the newest
// name of that merge, forgot it in the same commit: the second copy was
// installed too (a simulated fleet read the row three times).
func TestCopiesMergedAMinuteApartAreOneAppendHoweverOld(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	late := t0.Add(13 * time.Hour)
	first := Producers(nil).DropNamed([]NamedRows{
		{AppendKey: AppendKey{Producer: "a", Seq: 5, Digest: 7, Time: t0}, Fragment: "f1", Rows: 2},
		{AppendKey: AppendKey{Producer: "b", Seq: 1, Digest: 9, Time: late.Add(-time.Second)}, Fragment: "f1", Offset: 2, Rows: 3},
	})
	p, err := Producers(nil).RecordNamed(first, 10, late)
	if err != nil {
		t.Fatal(err)
	}
	if i := p.index("a"); i < 0 || !p[i].Time.Equal(late) {
		t.Fatalf("a's record after the first merge: %+v, want it active at the merge's time", p)
	}
	second := p.DropNamed([]NamedRows{{AppendKey: AppendKey{Producer: "a", Seq: 5, Digest: 7, Time: t0.Add(5 * time.Millisecond)}, Fragment: "f2", Rows: 2}})
	if !second[0].Dropped {
		t.Fatal("the second copy, merged a minute later, is installed again")
	}
	// Dropping it counts as meeting the name: the window moves on.
	q, err := p.RecordNamed(second, 11, late.Add(50*time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	third := q.Expire(late.Add(100 * time.Minute)).DropNamed([]NamedRows{{AppendKey: AppendKey{Producer: "a", Seq: 5, Digest: 7, Time: t0}, Fragment: "f3", Rows: 2}})
	if !third[0].Dropped {
		t.Fatal("a third copy, merged 50 minutes after the second, is installed again")
	}
	// Merged more than the window after the latest merge that met it, a
	// copy is a new append, as documented.
	if q.Expire(late.Add(111 * time.Minute)).Installed(second[0].AppendKey) {
		t.Fatal("the record outlived its window")
	}
}
