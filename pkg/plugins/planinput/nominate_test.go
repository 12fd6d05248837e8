package planinput

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/phalanx-sched/phalanx/pkg/groups"
	"github.com/phalanx-sched/phalanx/pkg/placement"
)

type recorder struct {
	added   map[string]string
	deleted []string
}

func (r *recorder) AddNominatedPod(_ klog.Logger, pi fwk.PodInfo, ni *fwk.NominatingInfo) {
	r.added[pi.GetPod().Name] = ni.NominatedNodeName
}

func (r *recorder) DeleteNominatedPodIfExists(p *corev1.Pod) { r.deleted = append(r.deleted, p.Name) }

// Pending members the plan places are nominated to their nodes, placed
// members are left alone, and a member the plan leaves out loses its old
// nomination only when the caller asks (a new plan does, a preemption not).
func TestNominateReservesThePlannedNodes(t *testing.T) {
	a, b, c := testPod("a", "1", ""), testPod("b", "1", ""), testPod("c", "1", "n3")
	tree := &groups.Tree{Members: []groups.Member{
		{Pod: a, State: groups.Pending}, {Pod: b, State: groups.Pending}, {Pod: c, State: groups.Bound, Node: "n3"},
	}}
	assignments := map[string]string{PodKey(a): "n1", PodKey(c): "n2"}
	for _, drop := range []bool{false, true} {
		r := &recorder{added: map[string]string{}}
		got := Nominate(klog.Background(), r, tree, assignments, drop)
		if len(got) != 1 || got[0] != a || len(r.added) != 1 || r.added["a"] != "n1" {
			t.Fatalf("drop=%v: nominated %v (returned %d pods); want only a on n1", drop, r.added, len(got))
		}
		if want := map[bool]int{false: 0, true: 1}[drop]; len(r.deleted) != want || (drop && r.deleted[0] != "b") {
			t.Fatalf("drop=%v: deleted nominations %v", drop, r.deleted)
		}
	}
}

// A member nominated in the API gets its node from an interchangeable
// sibling, whether the plan placed it elsewhere (they swap) or left it out
// (the sibling is left out instead). A sibling of another shape, or one
// nominated to the node as well, keeps what the plan gave it.
func TestKeepStatusNominationsSwapsInterchangeableMembers(t *testing.T) {
	pods := map[string]*corev1.Pod{}
	for _, n := range []string{"a", "b", "c", "d", "e", "f"} {
		pods[n] = testPod(n, "1", "")
	}
	pods["b"].Status.NominatedNodeName = "n1" // placed on n2, a has n1
	pods["d"].Status.NominatedNodeName = "n3" // left out, c has n3
	pods["f"].Status.NominatedNodeName = "n4" // e has n4 but is of another shape
	tree := &groups.Tree{}
	for _, n := range []string{"a", "b", "c", "d", "e", "f"} {
		tree.Members = append(tree.Members, groups.Member{Pod: pods[n], State: groups.Pending})
	}
	key := func(n string) string { return PodKey(pods[n]) }
	input := &placement.Group{Pending: []placement.Pod{
		{Key: key("a")}, {Key: key("b")}, {Key: key("c")}, {Key: key("d")}, {Key: key("e"), Shape: 1}, {Key: key("f")},
	}}
	pl := &placement.Plan{
		Assignments: map[string]string{key("a"): "n1", key("b"): "n2", key("c"): "n3", key("e"): "n4"},
		Unplaced:    []string{key("d"), key("f")},
	}
	KeepStatusNominations(input, tree, pl)
	want := map[string]string{key("a"): "n2", key("b"): "n1", key("d"): "n3", key("e"): "n4"}
	if len(pl.Assignments) != len(want) {
		t.Fatalf("assignments %v, want %v", pl.Assignments, want)
	}
	for k, n := range want {
		if pl.Assignments[k] != n {
			t.Fatalf("assignments %v, want %v", pl.Assignments, want)
		}
	}
	unplaced := map[string]bool{key("c"): true, key("f"): true}
	if len(pl.Unplaced) != 2 || !unplaced[pl.Unplaced[0]] || !unplaced[pl.Unplaced[1]] || pl.Unplaced[0] > pl.Unplaced[1] {
		t.Fatalf("unplaced %v, want c and f, sorted", pl.Unplaced)
	}
}
