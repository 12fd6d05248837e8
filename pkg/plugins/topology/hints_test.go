package topology

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	v1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
	"github.com/phalanx-sched/phalanx/pkg/groupcache"
)

// TestPodAddedHint: a member the planner rejected is requeued by a bound
// pod and by a new member of its own hierarchy, not by the pending pods
// of other gangs being created.
func TestPodAddedHint(t *testing.T) {
	fed := groupcache.NewFed()
	tp := &Topology{groups: fed}
	cpg := &v1alpha1.CompositePodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "job", UID: "job"}}
	cpg.Spec.SchedulingPolicy.Gang = &v1alpha1.CompositeGangSchedulingPolicy{MinGroupCount: 2}
	fed.OnComposite(cpg)
	pg := func(name, parent string) {
		p := &v1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID(name)}}
		p.Spec.SchedulingPolicy.Gang = &v1alpha1.GangSchedulingPolicy{MinCount: 2}
		if parent != "" {
			p.Spec.ParentCompositePodGroupName = &parent
		}
		fed.OnPodGroup(p)
	}
	pg("leader", "job")
	pg("workers", "job")
	pg("other", "")
	pod := func(name, group, node string) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID(name),
			Labels: map[string]string{v1alpha1.PodGroupLabel: group}}, Spec: corev1.PodSpec{NodeName: node}}
		return p
	}
	held := pod("leader-0", "leader", "")
	fed.OnPod(held)
	cases := []struct {
		name  string
		added *corev1.Pod
		want  fwk.QueueingHint
	}{
		{"a pending member of the same gang", pod("leader-1", "leader", ""), fwk.Queue},
		{"a pending member of a sibling gang under the same composite", pod("workers-0", "workers", ""), fwk.Queue},
		{"a pending member of another gang", pod("other-0", "other", ""), fwk.QueueSkip},
		{"a pending plain pod", &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "plain", UID: "plain"}}, fwk.QueueSkip},
		{"a bound pod of another gang", pod("other-1", "other", "n1"), fwk.Queue},
		{"a pending member of a gang elsewhere", func() *corev1.Pod { p := pod("x", "leader", ""); p.Namespace = "ns2"; return p }(), fwk.QueueSkip},
	}
	for _, tc := range cases {
		got, err := tp.podAdded(klog.Background(), held, nil, tc.added)
		require.NoError(t, err)
		assert.Equal(t, tc.want, got, tc.name)
	}
}
