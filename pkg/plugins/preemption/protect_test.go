package preemption

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	schedulinglisters "k8s.io/client-go/listers/scheduling/v1"
	"k8s.io/client-go/tools/cache"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	v1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
	"github.com/phalanx-sched/phalanx/pkg/groupcache"
	"github.com/phalanx-sched/phalanx/pkg/groups"
)

// boundSince marks pod bound at t, as the API server's binding does.
func boundSince(pod *corev1.Pod, t time.Time) *corev1.Pod {
	pod.Status.Conditions = append(pod.Status.Conditions, corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(t)})
	return pod
}

// TestCandidatesHonourMinimumRuntime reads protection and surplus from
// pods as the scheduler sees them: bind times from PodScheduled, minimum
// runtimes from the group, the pod and the profile.
func TestCandidatesHonourMinimumRuntime(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	protectedGang := groupOf("trained", 10, false)
	protectedGang.Spec.SchedulingPolicy.Gang.MinCount = 2
	protectedGang.Spec.MinRuntimeSeconds = ptr.To(int32(60))
	elastic := groupOf("elastic", 10, false)
	elastic.Spec.SchedulingPolicy.Gang.MinCount = 1
	allMode := groupOf("crew", 10, true)
	allMode.Spec.MinRuntimeSeconds = ptr.To(int32(60))

	annotated := running("annotated", 10, "")
	annotated.Annotations = map[string]string{v1alpha1.MinRuntimeAnnotation: "600"}
	pods := []*corev1.Pod{
		// whole at now-30s: protected until now+30s
		boundSince(running("trained-0", 10, "trained"), now.Add(-5*time.Minute)),
		boundSince(running("trained-1", 10, "trained"), now.Add(-30*time.Second)),
		// the crew's old member is past its runtime, its young one is not
		boundSince(running("crew-0", 10, "crew"), now.Add(-time.Hour)),
		boundSince(running("crew-1", 10, "crew"), now.Add(-10*time.Second)),
		// 600 s asked for, capped at the profile's 120 s
		boundSince(annotated, now.Add(-3*time.Minute)),
		boundSince(running("plain", 10, ""), now.Add(-time.Second)),
		boundSince(running("elastic-0", 10, "elastic"), now.Add(-2*time.Hour)),
		boundSince(running("elastic-1", 10, "elastic"), now.Add(-time.Hour)),
	}
	fed := &groupcache.Fed{
		Cache:           groups.NewCache(),
		PriorityClasses: schedulinglisters.NewPriorityClassLister(cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})),
	}
	for _, pg := range []*v1alpha1.PodGroup{protectedGang, elastic, allMode} {
		fed.SetPodGroup(pg)
	}
	for _, pod := range pods {
		fed.AddOrUpdatePod(pod)
	}
	p := &Preemption{groups: fed, clock: clocktesting.NewFakePassiveClock(now), runtime: runtimePolicy{byDefault: 5 * time.Second, cap: 2 * time.Minute}}
	ni := framework.NewNodeInfo(pods...)
	ni.SetNode(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a"}})

	victims, byKey, shielded := p.candidates([]fwk.NodeInfo{ni}, 1000, nil)
	got := map[string]bool{} // name -> surplus
	for _, v := range victims {
		got[byKey[v.Key].Name] = v.Surplus
	}
	assert.Equal(t, map[string]bool{"annotated": false, "elastic-0": false, "elastic-1": true}, got,
		"victims: past their minimum runtime; the elastic gang's member bound last is its surplus")
	until := map[string]time.Time{}
	for _, sv := range shielded {
		until[byKey[sv.Key].Name] = sv.until
	}
	assert.Equal(t, map[string]time.Time{
		"trained-0": now.Add(30 * time.Second), "trained-1": now.Add(30 * time.Second),
		"crew-0": now.Add(50 * time.Second), "crew-1": now.Add(50 * time.Second),
		"plain": now.Add(4 * time.Second),
	}, until, "protected: the gang from when it became whole, an all-mode group whole, a plain pod by the profile's default")

	prot := protectedBy([]string{shielded[0].Key, shielded[1].Key}, shielded)
	require.Equal(t, 2, prot.Victims)
	assert.Contains(t, prot.Error(), "until "+now.Add(30*time.Second).Format(time.RFC3339)+" (minimum runtime 1m0s)")

	// The reservations ask about the pods on a domain's nodes, without the
	// rest of their gang or unit: the group cache supplies those, so the
	// answers are the search's.
	asked := []*corev1.Pod{pods[0], pods[2], pods[5]} // trained-0, crew-0, plain
	assert.Equal(t, []time.Time{now.Add(30 * time.Second), now.Add(50 * time.Second), now.Add(4 * time.Second)}, p.ProtectedUntil(asked))
	p.runtime.cap = 0
	assert.Equal(t, make([]time.Time, 3), p.ProtectedUntil(asked), "a profile whose cap is 0 protects nothing")
}
