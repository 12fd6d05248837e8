package preemption

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	policy "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	schedulinglisters "k8s.io/client-go/listers/scheduling/v1"
	"k8s.io/client-go/tools/cache"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/utils/ptr"

	v1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
	"github.com/phalanx-sched/phalanx/pkg/groupcache"
	"github.com/phalanx-sched/phalanx/pkg/groups"
	"github.com/phalanx-sched/phalanx/pkg/placement"
	"github.com/phalanx-sched/phalanx/pkg/plugins/planinput"
)

const vipPriority = 1_000_000_000

// running is a pod of 2 cpu bound to node-a.
func running(name string, priority int32, group string) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID(name + "-uid"), Labels: map[string]string{}},
		Spec: corev1.PodSpec{
			NodeName: "node-a",
			Priority: ptr.To(priority),
			Containers: []corev1.Container{{Name: "main", Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")},
			}}},
		},
		Status: corev1.PodStatus{Phase: corev1.PodRunning},
	}
	if group != "" {
		p.Labels[v1alpha1.PodGroupLabel] = group
	}
	return p
}

// groupOf is a PodGroup of the given priority; all makes it one eviction unit.
func groupOf(name string, priority int32, all bool) *v1alpha1.PodGroup {
	pg := &v1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID(name + "-uid")}}
	pg.Spec.SchedulingPolicy.Gang = &v1alpha1.GangSchedulingPolicy{MinCount: 1}
	pg.Spec.Priority = ptr.To(priority)
	if all {
		pg.Spec.DisruptionMode = &v1alpha1.DisruptionMode{All: &v1alpha1.AllDisruptionMode{}}
	}
	return pg
}

// evictedFor answers which of the pods running on node-a (4 cpu, full)
// group preemption evicts for a one-pod gang of priority 1000 whose pod
// needs cpu millicores; nil when it evicts nothing.
func evictedFor(t *testing.T, podGroups []*v1alpha1.PodGroup, pods []*corev1.Pod, cpu int64) []string {
	t.Helper()
	return evictedOn(t, podGroups, nil, pods, 4000, cpu)
}

// evictedOn is evictedFor on a node-a of nodeCPU millicores, with the
// PodDisruptionBudgets pdbs.
func evictedOn(t *testing.T, podGroups []*v1alpha1.PodGroup, pdbs []*policy.PodDisruptionBudget, pods []*corev1.Pod, nodeCPU, cpu int64) []string {
	t.Helper()
	fed := &groupcache.Fed{
		Cache:           groups.NewCache(),
		PriorityClasses: schedulinglisters.NewPriorityClassLister(cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})),
	}
	for _, pg := range podGroups {
		fed.SetPodGroup(pg)
	}
	for _, pod := range pods {
		fed.AddOrUpdatePod(pod)
	}
	p := &Preemption{groups: fed, pdbs: pdbLister(t, pdbs...)}
	ni := framework.NewNodeInfo(pods...)
	ni.SetNode(&corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "node-a"},
		Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{
			corev1.ResourceCPU: *resource.NewMilliQuantity(nodeCPU, resource.DecimalSI), corev1.ResourcePods: resource.MustParse("110"),
		}},
	})
	infos := []fwk.NodeInfo{ni}
	const preemptor = 1000
	victims, byKey, _ := p.candidates(infos, preemptor, nil)
	nodes := planinput.NodesFromSnapshot(infos, func(string) []fwk.PodInfo { return nil }, nil)
	gang := &placement.Group{
		Name: "ns/trainer", Policy: placement.Gang, MinCount: 1,
		Shapes:  []placement.Shape{{Requests: placement.Resources{corev1.ResourceCPU: cpu}}},
		Pending: []placement.Pod{{Key: "trainer-0", Shape: 0}},
	}
	result, err := placement.FindVictims(nodes, victims, gang, preemptor, placement.PreemptOptions{})
	var inf *placement.Infeasible
	if err != nil {
		require.ErrorAs(t, err, &inf)
		return nil
	}
	var names []string
	for _, k := range result.Victims {
		names = append(names, byKey[k].Name)
	}
	return names
}

func TestVictimsCountAtTheirOwnPriority(t *testing.T) {
	tests := []struct {
		name      string
		podGroups []*v1alpha1.PodGroup
		pods      []*corev1.Pod
		evicted   []string
		// needs is the preemptor's cpu in millicores; 0 means the whole node.
		needs int64
	}{
		{
			name:      "pods of priority 0 labelled into a PodGroup of priority 1e9 are evicted for priority 1000",
			podGroups: []*v1alpha1.PodGroup{groupOf("vip", vipPriority, false)},
			pods:      []*corev1.Pod{running("squatter-0", 0, "vip"), running("squatter-1", 0, "vip")},
			evicted:   []string{"squatter-0", "squatter-1"},
		},
		{
			name:      "pods scheduled at their PodGroup's priority 1e9 keep it",
			podGroups: []*v1alpha1.PodGroup{groupOf("vip", vipPriority, false)},
			pods:      []*corev1.Pod{running("vip-0", vipPriority, "vip"), running("vip-1", vipPriority, "vip")},
		},
		{
			name:      "pods whose own priority is above their PodGroup's count at their own",
			podGroups: []*v1alpha1.PodGroup{groupOf("batch", 10, false)},
			pods:      []*corev1.Pod{running("batch-0", 5000, "batch"), running("batch-1", 5000, "batch")},
		},
		{
			name:      "a low pod labelled into a disruptionMode-all PodGroup is evicted alone, and the group's own member is not",
			podGroups: []*v1alpha1.PodGroup{groupOf("crew", vipPriority, true)},
			pods:      []*corev1.Pod{running("crew-0", vipPriority, "crew"), running("squatter", 0, "crew")},
			evicted:   []string{"squatter"},
			needs:     2000,
		},
		{
			name:    "plain pods are evicted at their own priority",
			pods:    []*corev1.Pod{running("plain-0", 10, ""), running("plain-1", 10, "")},
			evicted: []string{"plain-0", "plain-1"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			needs := tt.needs
			if needs == 0 {
				needs = 4000
			}
			assert.Equal(t, tt.evicted, evictedFor(t, tt.podGroups, tt.pods, needs))
		})
	}
}
