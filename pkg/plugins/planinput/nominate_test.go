package planinput

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/phalanx-sched/phalanx/pkg/groups"
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
