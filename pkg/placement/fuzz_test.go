package placement_test

import (
	"errors"
	"testing"

	"github.com/phalanx-sched/phalanx/pkg/placement"
)

// firstLeafWithPods finds a leaf with a pending pod, depth first.
func firstLeafWithPods(g *placement.Group) *placement.Group {
	if len(g.Children) == 0 {
		if len(g.Pending) > 0 {
			return g
		}
		return nil
	}
	for _, c := range g.Children {
		if l := firstLeafWithPods(c); l != nil {
			return l
		}
	}
	return nil
}

// corrupt sometimes breaks the input in a way PlanGroup must reject as
// invalid rather than plan or panic on. It reports whether it did.
func corrupt(src source, root *placement.Group) bool {
	if src.intn(16) != 15 {
		return false
	}
	leaf := firstLeafWithPods(root)
	if leaf == nil {
		return false
	}
	switch src.intn(3) {
	case 0:
		leaf.Pending[0].Shape = len(leaf.Shapes)
	case 1:
		leaf.Pending = append(leaf.Pending, leaf.Pending[0])
	default:
		leaf.Shapes[leaf.Pending[0].Shape].Requests[cpu] = -1
	}
	return true
}

// FuzzPlanGroup decodes bytes into a small cluster and group tree and checks
// the same invariants as the property test: no panic, no overcommit, no
// broken topology constraint, no gang below quorum, exact feasibility where
// promised, and a plain error for invalid input.
func FuzzPlanGroup(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{0, 5, 4, 2, 1, 4, 0, 1, 1, 0, 3, 2, 2, 0, 1, 0, 2, 4})
	f.Add([]byte("phalanx gang of gangs, zone then rack"))
	f.Fuzz(func(t *testing.T, data []byte) {
		src := &byteSource{data: data}
		nodes, root, opts := genScenario(src)
		if corrupt(src, root) {
			plan, err := placement.PlanGroup(nodes, root, opts)
			var inf *placement.Infeasible
			if err == nil || plan != nil || errors.As(err, &inf) {
				t.Fatalf("invalid input was not rejected: plan %v, err %v\n%s", plan, err, describe(nodes, root, opts))
			}
			return
		}
		if err := runScenario(nodes, root, opts); err != nil {
			t.Fatalf("%v\n%s", err, describe(nodes, root, opts))
		}
	})
}
