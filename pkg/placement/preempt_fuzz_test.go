package placement_test

import (
	"testing"
)

// FuzzFindVictims decodes bytes into a small cluster full of victims and a
// group tree, and checks FindVictims as the randomised test does: the
// exhaustive search against the brute force, the heuristic for soundness
// and, on a homogeneous leaf, for feasibility and the highest priority,
// both plans against PlanGroup once the victims are gone, and the inputs
// left unmodified.
func FuzzFindVictims(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte("balloons make room for a gang in one rack"))
	f.Fuzz(func(t *testing.T, data []byte) {
		sc := genPreemption(&byteSource{data: data})
		if _, err := checkPreemption(sc); err != nil {
			t.Fatalf("%v\n%s", err, describePreemption(sc))
		}
	})
}
