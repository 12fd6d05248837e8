package topology

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/backend/cache"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	v1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
	"github.com/phalanx-sched/phalanx/pkg/groups"
	"github.com/phalanx-sched/phalanx/pkg/groupstatus"
	"github.com/phalanx-sched/phalanx/pkg/plugins/probe"
)

// nominatingHandle is planHandle with an API server (a fake clientset) and
// the scheduler's in-memory nominations, by pod name.
type nominatingHandle struct {
	planHandle
	client    *fake.Clientset
	mu        sync.Mutex
	nominated map[string]string
}

func (h *nominatingHandle) ClientSet() kubernetes.Interface { return h.client }
func (h *nominatingHandle) AddNominatedPod(_ klog.Logger, pi fwk.PodInfo, ni *fwk.NominatingInfo) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.nominated[pi.GetPod().Name] = ni.NominatedNodeName
}
func (h *nominatingHandle) DeleteNominatedPodIfExists(p *corev1.Pod) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.nominated, p.Name)
}
func (h *nominatingHandle) nominationOf(name string) (string, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	n, ok := h.nominated[name]
	return n, ok
}

// nominationFixture: one node of two cpu and a label gang of three one-cpu
// members with a minimum of two, which an earlier preemption nominated in
// the API: g-0 to a node that is gone since, g-1 and g-2 to n. A plan
// places two of them on n and leaves one out.
func nominationFixture(t *testing.T) (*Topology, *nominatingHandle, []*corev1.Pod) {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"}, Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("8Gi"), corev1.ResourcePods: resource.MustParse("110"),
	}}}
	client := fake.NewSimpleClientset()
	h := &nominatingHandle{
		planHandle: planHandle{snapshot: cache.NewSnapshot(nil, []*corev1.Node{node}), informers: informers.NewSharedInformerFactory(client, 0)},
		client:     client, nominated: map[string]string{},
	}
	fed := groups.NewFed()
	tp := &Topology{handle: h, groups: fed, status: &groupstatus.Writer{}, args: Args{PlanTTLSeconds: 30},
		plans: map[groups.Key]*plan{}, rejected: map[groups.Key]map[string]map[string]rejection{},
		prober: probe.New(h), unknownFilters: func() []string { return nil }, runCtx: context.Background()}
	var members []*corev1.Pod
	for i, nominated := range []string{"gone", "n", "n"} {
		p := testPod(fmt.Sprintf("g-%d", i), "1", "")
		p.Namespace = "ns"
		p.UID = types.UID(p.Name)
		p.Labels = map[string]string{v1alpha1.LightweightNameLabel: "g", v1alpha1.LightweightMinAvailableLabel: "2"}
		p.Status.NominatedNodeName = nominated
		_, err := client.CoreV1().Pods("ns").Create(context.Background(), p, metav1.CreateOptions{})
		require.NoError(t, err)
		fed.OnPod(p)
		members = append(members, p)
	}
	return tp, h, members
}

// TestPlanCorrectsStaleStatusNominations: the queue refiles a pod's
// nomination from its status at every update, so after the plan every
// member's nominatedNodeName in the API must say what the plan says: its
// planned node, or none for the member the plan leaves out. Otherwise the
// left-out member takes its old node back from a planned sibling at its
// next failed attempt.
func TestPlanCorrectsStaleStatusNominations(t *testing.T) {
	tp, h, members := nominationFixture(t)
	_, st := tp.PreFilter(context.Background(), framework.NewCycleState(), members[0], nil)
	require.True(t, st.IsSuccess() || st.Code() == fwk.Unschedulable, "%v", st)

	planned := 0
	for _, m := range members {
		want, ok := h.nominationOf(m.Name)
		if ok {
			planned++
			assert.Equal(t, "n", want)
		}
		assert.EventuallyWithT(t, func(c *assert.CollectT) {
			got, err := h.client.CoreV1().Pods("ns").Get(context.Background(), m.Name, metav1.GetOptions{})
			require.NoError(c, err)
			assert.Equal(c, want, got.Status.NominatedNodeName, "%s's nominatedNodeName in the API (planned: %v)", m.Name, ok)
		}, 5*time.Second, 20*time.Millisecond)
	}
	assert.Equal(t, 2, planned, "the plan places two members")
}
