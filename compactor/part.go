package compactor

import "fmt"

// Part is one of several processes that share a table's compaction (a
// Kubernetes Indexed Job's pods, say): part Index of Of compacts only the
// bins whose first fragment falls to it, by a hash of the fragment's ID,
// under a lease of its own, so that the parts compact disjoint bins of one
// table at once. The zero Part (or Of 1) is the whole table.
//
// The split costs correctness nothing: a fragment falls to one part
// whatever the version a part plans from, and where two plans still meet
// (a bin that grew across another part's output) the conflict matrix
// lets one compaction commit and the other plan again, as for any two
// compactions over the same fragments.
type Part struct {
	Index, Of int
}

// whole reports whether the part is the whole table.
func (p Part) whole() bool { return p.Of <= 1 }

// owns reports whether the bin that starts with fragment id falls to p.
func (p Part) owns(id uint64) bool {
	if p.whole() {
		return true
	}
	return mix64(id)%uint64(p.Of) == uint64(p.Index)
}

// leaseDir is the folder of p's lease: the table's for the whole table.
func (p Part) leaseDir() string {
	if p.whole() {
		return leaseDir
	}
	return fmt.Sprintf("_compactor/lease-part-%d-of-%d/", p.Index, p.Of)
}

func (p Part) String() string {
	if p.whole() {
		return "the whole table"
	}
	return fmt.Sprintf("part %d of %d", p.Index, p.Of)
}

// validate checks 0 <= Index < max(Of, 1).
func (p Part) validate() error {
	if p.Of < 0 || p.Index < 0 || p.Index >= max(p.Of, 1) {
		return fmt.Errorf("%w: Policy: Part %d of %d: want 0 <= part < parts", ErrInvalidOptions, p.Index, p.Of)
	}
	return nil
}

// mix64 is SplitMix64's finalizer: fragment IDs count up, and a bin's
// first ID would otherwise fall to parts by the bins' sizes.
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	return x ^ x>>31
}
