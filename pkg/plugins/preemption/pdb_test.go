package preemption

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	policy "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	policylisters "k8s.io/client-go/listers/policy/v1"
	schedulinglisters "k8s.io/client-go/listers/scheduling/v1"
	"k8s.io/client-go/tools/cache"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	"github.com/phalanx-sched/phalanx/pkg/groupcache"
	"github.com/phalanx-sched/phalanx/pkg/groups"
)

// pdbLister serves pdbs as the informer's lister would.
func pdbLister(t *testing.T, pdbs ...*policy.PodDisruptionBudget) policylisters.PodDisruptionBudgetLister {
	t.Helper()
	idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	for _, pdb := range pdbs {
		require.NoError(t, idx.Add(pdb))
	}
	return policylisters.NewPodDisruptionBudgetLister(idx)
}

// budget is a PodDisruptionBudget in ns selecting app=web that allows
// allowed more disruptions, and has already processed the evictions of the
// pods disrupted.
func budget(ns string, allowed int32, disrupted ...string) *policy.PodDisruptionBudget {
	pdb := &policy.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"},
		Spec:       policy.PodDisruptionBudgetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}},
		Status:     policy.PodDisruptionBudgetStatus{DisruptionsAllowed: allowed},
	}
	for _, name := range disrupted {
		if pdb.Status.DisruptedPods == nil {
			pdb.Status.DisruptedPods = map[string]metav1.Time{}
		}
		pdb.Status.DisruptedPods[name] = metav1.Now()
	}
	return pdb
}

// web is a running pod of ns labelled app=web.
func web(ns, name string, priority int32) *corev1.Pod {
	p := running(name, priority, "")
	p.Namespace = ns
	p.Labels["app"] = "web"
	return p
}

// TestCandidatesCountVictimsAgainstTheirBudgets: the victim search sees a
// victim as violating a PodDisruptionBudget only once the budget's
// allowance is used up by the victims it would evict before it.
func TestCandidatesCountVictimsAgainstTheirBudgets(t *testing.T) {
	tests := []struct {
		name string
		pdbs []*policy.PodDisruptionBudget
		pods []*corev1.Pod
		// violating is the names of the candidates marked ViolatesPDB.
		violating []string
	}{
		{
			name:      "a budget allowing one disruption, selecting two victims: the second violates it",
			pdbs:      []*policy.PodDisruptionBudget{budget("ns", 1)},
			pods:      []*corev1.Pod{web("ns", "web-0", 10), web("ns", "web-1", 10)},
			violating: []string{"web-1"},
		},
		{
			name:      "the allowance goes to the victim the search evicts first, the lower-priority one",
			pdbs:      []*policy.PodDisruptionBudget{budget("ns", 1)},
			pods:      []*corev1.Pod{web("ns", "web-0", 20), web("ns", "web-1", 10)},
			violating: []string{"web-0"},
		},
		{
			name:      "a budget allowing no disruption: every victim it selects violates it",
			pdbs:      []*policy.PodDisruptionBudget{budget("ns", 0)},
			pods:      []*corev1.Pod{web("ns", "web-0", 10), web("ns", "web-1", 10)},
			violating: []string{"web-0", "web-1"},
		},
		{
			name:      "a victim already in the budget's disrupted pods uses none of its allowance",
			pdbs:      []*policy.PodDisruptionBudget{budget("ns", 0, "web-0")},
			pods:      []*corev1.Pod{web("ns", "web-0", 10), web("ns", "web-1", 10)},
			violating: []string{"web-1"},
		},
		{
			name:      "pods of another namespace are not counted against the budget",
			pdbs:      []*policy.PodDisruptionBudget{budget("ns", 1)},
			pods:      []*corev1.Pod{web("other", "web-a", 1), web("other", "web-b", 1), web("ns", "web-0", 10), web("ns", "web-1", 10)},
			violating: []string{"web-1"},
		},
		{
			name: "pods the budget does not select are not counted",
			pdbs: []*policy.PodDisruptionBudget{budget("ns", 0)},
			pods: []*corev1.Pod{running("plain-0", 10, "")},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fed := &groupcache.Fed{
				Cache:           groups.NewCache(),
				PriorityClasses: schedulinglisters.NewPriorityClassLister(cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})),
			}
			p := &Preemption{groups: fed, pdbs: pdbLister(t, tt.pdbs...)}
			ni := framework.NewNodeInfo(tt.pods...)
			ni.SetNode(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a"}})
			victims, byKey, _ := p.candidates([]fwk.NodeInfo{ni}, 1000, nil)
			require.Len(t, victims, len(tt.pods))
			var violating []string
			for _, v := range victims {
				if v.ViolatesPDB {
					violating = append(violating, byKey[v.Key].Name)
				}
			}
			assert.ElementsMatch(t, tt.violating, violating)
		})
	}
}

// TestGroupPreemptionSparesABudgetBeyondItsAllowance: of two victims a
// budget allowing one disruption selects, group preemption evicts one and
// takes an unprotected pod of the same priority for the rest of its room,
// rather than breaking the budget.
func TestGroupPreemptionSparesABudgetBeyondItsAllowance(t *testing.T) {
	pods := []*corev1.Pod{web("ns", "a-web-0", 10), web("ns", "a-web-1", 10), running("z-plain", 10, "")}
	evicted := evictedOn(t, nil, []*policy.PodDisruptionBudget{budget("ns", 1)}, pods, 6000, 4000)
	assert.ElementsMatch(t, []string{"a-web-0", "z-plain"}, evicted)
}
