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
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/backend/cache"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	v1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
	"github.com/phalanx-sched/phalanx/pkg/groupcache"
	"github.com/phalanx-sched/phalanx/pkg/groups"
	"github.com/phalanx-sched/phalanx/pkg/groupstatus"
	"github.com/phalanx-sched/phalanx/pkg/plugins/pluginrt"
	"github.com/phalanx-sched/phalanx/pkg/plugins/probe"
)

// planHandle is what planning touches of the framework: a fixed snapshot,
// no nominations. Anything else panics on the nil embedded interface.
type planHandle struct {
	fwk.Handle
	snapshot  *cache.Snapshot
	informers informers.SharedInformerFactory
}

func (h *planHandle) SnapshotSharedLister() fwk.SharedLister                        { return h.snapshot }
func (h *planHandle) NominatedPodsForNode(string) []fwk.PodInfo                     { return nil }
func (h *planHandle) AddNominatedPod(klog.Logger, fwk.PodInfo, *fwk.NominatingInfo) {}
func (h *planHandle) DeleteNominatedPodIfExists(*corev1.Pod)                        {}
func (h *planHandle) SharedInformerFactory() informers.SharedInformerFactory        { return h.informers }
func (h *planHandle) EventRecorder() events.EventRecorderLogger                     { return nil }

// SharedDRAManager is nil, a profile without DRA: the first PreFilter's
// release of orphaned claims (releaseOrphans) reads it on its own
// goroutine, which the embedded nil Handle would crash.
func (h *planHandle) SharedDRAManager() fwk.SharedDRAManager { return nil }

// TestPreFilterMarksMembersAFeasiblePlanLeavesOut: a label gang of three
// one-cpu members with a minimum of two, on a node of two cpu. The plan
// places two; the third is told there is no room and marked surplus, so
// the gang plugin does not release its planned siblings for it.
func TestPreFilterMarksMembersAFeasiblePlanLeavesOut(t *testing.T) {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"}, Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("8Gi"), corev1.ResourcePods: resource.MustParse("110"),
	}}}
	h := &planHandle{snapshot: cache.NewSnapshot(nil, []*corev1.Node{node}), informers: informers.NewSharedInformerFactory(fake.NewSimpleClientset(), 0)}
	fed := groupcache.NewFed()
	tp := &Topology{handle: h, groups: fed, status: &groupstatus.Writer{}, args: pluginArgs{PlanTTLSeconds: 30},
		plans: map[groups.Key]*plan{}, rejected: map[groups.Key]map[string]map[string]rejection{},
		prober: probe.New(h), unknownFilters: func() []string { return nil }}

	gang := func(name string, minAvailable, n int) []*corev1.Pod {
		var out []*corev1.Pod
		for i := range n {
			p := testPod(fmt.Sprintf("%s-%d", name, i), "1", "")
			p.UID = types.UID(fmt.Sprintf("%s-%d", name, i))
			p.Labels = map[string]string{v1alpha1.LightweightNameLabel: name, v1alpha1.LightweightMinAvailableLabel: fmt.Sprint(minAvailable)}
			fed.OnPod(p)
			out = append(out, p)
		}
		return out
	}
	preFilter := func(pod *corev1.Pod) (*fwk.PreFilterResult, *fwk.Status, bool) {
		state := framework.NewCycleState()
		res, st := tp.PreFilter(context.Background(), state, pod, nil)
		return res, st, pluginrt.Surplus(state)
	}

	members := gang("g", 2, 3)
	var planned, surplus []string
	for _, m := range members {
		res, st, isSurplus := preFilter(m)
		if st.IsSuccess() {
			require.NotNil(t, res)
			assert.False(t, isSurplus, "%s is planned", m.Name)
			planned = append(planned, m.Name)
			continue
		}
		assert.Equal(t, fwk.Unschedulable, st.Code())
		assert.Contains(t, st.Message(), "no room for member "+m.Name)
		assert.True(t, isSurplus, "%s is left out of a feasible plan", m.Name)
		surplus = append(surplus, m.Name)
	}
	assert.Len(t, planned, 2)
	assert.Len(t, surplus, 1)

	// A gang that cannot reach its minimum fails for real: its members
	// are not surplus, and the gang retries as a unit.
	for _, m := range gang("big", 3, 3) {
		_, st, isSurplus := preFilter(m)
		assert.Equal(t, fwk.Unschedulable, st.Code())
		assert.False(t, isSurplus, "%s belongs to a gang that does not fit", m.Name)
	}
}
