package planinput

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	"github.com/phalanx-sched/phalanx/pkg/groups"
	"github.com/phalanx-sched/phalanx/pkg/placement"
)

// Nominator is the part of the framework's handle that nominates pods.
type Nominator interface {
	AddNominatedPod(logger klog.Logger, pod fwk.PodInfo, nominatingInfo *fwk.NominatingInfo)
	DeleteNominatedPodIfExists(pod *corev1.Pod)
}

// Nominate records with n the planned node of every pending member of tree
// that assignments (by PodKey) places, so other pods' Filter accounts for
// the room promised to them, and returns those members. With dropLeftOut, a
// pending member the plan leaves out loses any nomination it still holds
// (an older plan's, a preemption's), which would otherwise count against
// its placed siblings in the framework's Filter. The topology plugin
// nominates its plans and the preemption plugin the plan its evictions make
// room for, both through here.
func Nominate(logger klog.Logger, n Nominator, tree *groups.Tree, assignments map[string]string, dropLeftOut bool) []*corev1.Pod {
	var out []*corev1.Pod
	var walk func(*groups.Tree)
	walk = func(tr *groups.Tree) {
		for _, m := range tr.Members {
			if m.State != groups.Pending {
				continue
			}
			node, ok := assignments[PodKey(m.Pod)]
			if !ok {
				if dropLeftOut {
					n.DeleteNominatedPodIfExists(m.Pod)
				}
				continue
			}
			pi, err := framework.NewPodInfo(m.Pod)
			if err != nil {
				continue
			}
			n.AddNominatedPod(logger, pi, &fwk.NominatingInfo{NominatedNodeName: node, NominatingMode: fwk.ModeOverride})
			out = append(out, m.Pod)
		}
		for _, ch := range tr.Children {
			walk(ch)
		}
	}
	walk(tree)
	return out
}

// StatusNomination is a pending member whose nominatedNodeName in the API
// disagrees with its group's plan, and the node (or "" when the plan leaves
// it out) the API should say instead.
type StatusNomination struct {
	Pod  *corev1.Pod
	Node string
}

// StaleStatusNominations lists the pending members of tree whose
// status.nominatedNodeName (written by an earlier preemption) disagrees with
// assignments. The queue files a pod's nomination from its status on every
// update of the pod, so such a member would take back a node its plan gave
// a sibling, or keep one it no longer needs, at its next failed attempt.
// Members without a nomination in the API are left alone: their plan
// nomination lives in the scheduler only, and writing it would cost an API
// request per member.
func StaleStatusNominations(tree *groups.Tree, assignments map[string]string) []StatusNomination {
	var out []StatusNomination
	var walk func(*groups.Tree)
	walk = func(tr *groups.Tree) {
		for _, m := range tr.Members {
			if m.State != groups.Pending || m.Pod.Status.NominatedNodeName == "" {
				continue
			}
			if node := assignments[PodKey(m.Pod)]; node != m.Pod.Status.NominatedNodeName {
				out = append(out, StatusNomination{Pod: m.Pod, Node: node})
			}
		}
		for _, ch := range tr.Children {
			walk(ch)
		}
	}
	walk(tree)
	return out
}

// KeepStatusNominations hands every pending member of tree that holds a
// status.nominatedNodeName the node it names, when pl gives that node to an
// interchangeable sibling instead: one of the same leaf and shape of input
// (BuildInput's, for tree), not nominated there itself. The two swap places,
// so the plan stays as valid as it was. The planner does not know about
// nominations and orders interchangeable members by key, but the
// framework's Filter counts a member's nomination against every pod of equal
// priority put on its node, itself excepted: with a host port or one member
// per node, the sibling would be refused on a node that is free for the
// gang. The members that keep their node are those a preemption named.
func KeepStatusNominations(input *placement.Group, tree *groups.Tree, pl *placement.Plan) {
	nominated := map[string]string{}
	var walk func(*groups.Tree)
	walk = func(tr *groups.Tree) {
		for _, m := range tr.Members {
			if m.State == groups.Pending && m.Pod.Status.NominatedNodeName != "" {
				nominated[PodKey(m.Pod)] = m.Pod.Status.NominatedNodeName
			}
		}
		for _, ch := range tr.Children {
			walk(ch)
		}
	}
	walk(tree)
	if len(nominated) == 0 || pl == nil {
		return
	}
	unplacedChanged := false
	var visit func(g *placement.Group)
	visit = func(g *placement.Group) {
		for _, ch := range g.Children {
			visit(ch)
		}
		for _, p := range g.Pending {
			want, ok := nominated[p.Key]
			if !ok || pl.Assignments[p.Key] == want {
				continue
			}
			for _, q := range g.Pending {
				if q.Key == p.Key || q.Shape != p.Shape || pl.Assignments[q.Key] != want || nominated[q.Key] == want {
					continue
				}
				if had, placed := pl.Assignments[p.Key]; placed {
					pl.Assignments[q.Key] = had
				} else {
					delete(pl.Assignments, q.Key)
					for i, u := range pl.Unplaced {
						if u == p.Key {
							pl.Unplaced[i] = q.Key
							unplacedChanged = true
						}
					}
				}
				pl.Assignments[p.Key] = want
				break
			}
		}
	}
	visit(input)
	if unplacedChanged {
		slices.Sort(pl.Unplaced)
	}
}
