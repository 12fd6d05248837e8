package topology

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/backend/cache"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	v1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
	"github.com/phalanx-sched/phalanx/pkg/groupcache"
	"github.com/phalanx-sched/phalanx/pkg/groups"
	"github.com/phalanx-sched/phalanx/pkg/groupstatus"
	"github.com/phalanx-sched/phalanx/pkg/plugins/probe"
)

// TestInfeasiblePlanAnswersForItsRevisionOnly: a failed plan answers for
// the gang's other members while nothing changes, but not once the gang's
// minimum dropped, even when the plan outlived the change's notification
// (it was being made from the hierarchy as it stood just before).
func TestInfeasiblePlanAnswersForItsRevisionOnly(t *testing.T) {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"}, Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("8Gi"), corev1.ResourcePods: resource.MustParse("110"),
	}}}
	h := &planHandle{snapshot: cache.NewSnapshot(nil, []*corev1.Node{node}), informers: informers.NewSharedInformerFactory(fake.NewSimpleClientset(), 0)}
	fed := groupcache.NewFed()
	// No groupChanged subscription: the plan is never dropped for the
	// change, as when it is stored after the drop.
	tp := &Topology{handle: h, groups: fed, status: &groupstatus.Writer{}, args: pluginArgs{PlanTTLSeconds: 30},
		plans: map[groups.Key]*plan{}, rejected: map[groups.Key]map[string]map[string]rejection{},
		prober: probe.New(h), unknownFilters: func() []string { return nil }}
	members := make([]*corev1.Pod, 3)
	setMin := func(minAvailable int) {
		for i := range members {
			p := testPod(fmt.Sprintf("g-%d", i), "1", "")
			p.UID = types.UID(p.Name)
			p.Labels = map[string]string{v1alpha1.LightweightNameLabel: "g", v1alpha1.LightweightMinAvailableLabel: fmt.Sprint(minAvailable)}
			fed.OnPod(p)
			members[i] = p
		}
	}
	setMin(3)
	_, st := tp.PreFilter(context.Background(), framework.NewCycleState(), members[0], nil)
	require.Equal(t, fwk.Unschedulable, st.Code(), "three one-cpu members do not fit two cpu: %v", st)

	setMin(2)
	_, st = tp.PreFilter(context.Background(), framework.NewCycleState(), members[0], nil)
	assert.True(t, st.IsSuccess(), "two of them fit: %v", st)
}
