package preemption

import (
	"context"
	"fmt"
	"sort"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/apis/config"
	"k8s.io/kubernetes/pkg/scheduler/backend/cache"
	internalqueue "k8s.io/kubernetes/pkg/scheduler/backend/queue"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/defaultbinder"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/feature"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/noderesources"
	plqueuesort "k8s.io/kubernetes/pkg/scheduler/framework/plugins/queuesort"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	schedmetrics "k8s.io/kubernetes/pkg/scheduler/metrics"
	tf "k8s.io/kubernetes/pkg/scheduler/testing/framework"
	"k8s.io/utils/ptr"

	v1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
	"github.com/phalanx-sched/phalanx/pkg/groupcache"
	"github.com/phalanx-sched/phalanx/pkg/groups"
	"github.com/phalanx-sched/phalanx/pkg/groupstatus"
	"github.com/phalanx-sched/phalanx/pkg/plugins/probe"
)

// tenantPod is a running pod of cpu millicores on node-a, in PodGroup group
// when group is not "".
func tenantPod(name string, priority int32, cpu int64, group string) *corev1.Pod {
	p := running(name, priority, group)
	p.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = *resource.NewMilliQuantity(cpu, resource.DecimalSI)
	return p
}

// basicGroup is a PodGroup without a gang policy (each pod schedules on its
// own), of the given priority; all makes it one eviction unit.
func basicGroup(name string, priority int32, all bool) *v1alpha1.PodGroup {
	pg := groupOf(name, priority, all)
	pg.Spec.SchedulingPolicy.Gang = nil
	pg.Spec.SchedulingPolicy.Basic = &v1alpha1.BasicSchedulingPolicy{}
	return pg
}

// tenantA is the squatting tenant: seven priority-0 pods and one of
// priority 1000, 2 cpu each, all labelled after binding into a basic
// PodGroup "crew" of priority 1000 with disruptionMode all. They fill
// node-a's 16 cpu.
func tenantA() ([]*v1alpha1.PodGroup, []*corev1.Pod) {
	var pods []*corev1.Pod
	for i := range 7 {
		pods = append(pods, tenantPod(fmt.Sprintf("low-%d", i), 0, 2000, "crew"))
	}
	pods = append(pods, tenantPod("high", 1000, 2000, "crew"))
	return []*v1alpha1.PodGroup{basicGroup("crew", 1000, true)}, pods
}

// preemptPlainPod runs PhalanxPreemption's pod path (upstream's evaluator
// with Phalanx's victims) for a plain pod of priority prio needing cpu
// millicores, on node-a (nodeCPU millicores) running pods, and returns the
// pods it evicted, sorted.
func preemptPlainPod(t *testing.T, podGroups []*v1alpha1.PodGroup, pods []*corev1.Pod, nodeCPU int64, prio int32, cpu int64) []string {
	t.Helper()
	ctx, cancel := context.WithCancel(klog.NewContext(context.Background(), klog.Background()))
	defer cancel()
	schedmetrics.Register()

	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "node-a"},
		Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{
			corev1.ResourceCPU: *resource.NewMilliQuantity(nodeCPU, resource.DecimalSI), corev1.ResourcePods: resource.MustParse("110"),
		}},
	}
	preemptor := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns-b", Name: "tenant-b", UID: "tenant-b-uid"},
		Spec: corev1.PodSpec{
			Priority: ptr.To(prio),
			Containers: []corev1.Container{{Name: "main", Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: *resource.NewMilliQuantity(cpu, resource.DecimalSI)},
			}}},
		},
	}
	objs := []runtime.Object{node, preemptor}
	for _, p := range pods {
		objs = append(objs, p)
	}
	client := fake.NewClientset(objs...)
	var evicted []string
	client.PrependReactor("delete", "pods", func(action k8stesting.Action) (bool, runtime.Object, error) {
		evicted = append(evicted, action.(k8stesting.DeleteAction).GetName())
		return false, nil, nil
	})
	factory := informers.NewSharedInformerFactory(client, 0)
	pdbs := factory.Policy().V1().PodDisruptionBudgets().Lister()
	podLister := factory.Core().V1().Pods().Lister()
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())

	snapshot := cache.NewSnapshot(pods, []*corev1.Node{node})
	fh, err := tf.NewFramework(ctx,
		[]tf.RegisterPluginFunc{
			tf.RegisterPluginAsExtensions(noderesources.Name, func(ctx context.Context, args runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
				return noderesources.NewFit(ctx, &config.NodeResourcesFitArgs{ScoringStrategy: &config.ScoringStrategy{
					Type: config.LeastAllocated, Resources: []config.ResourceSpec{{Name: "cpu", Weight: 1}},
				}}, h, feature.Features{})
			}, "PreFilter", "Filter"),
			tf.RegisterQueueSortPlugin(plqueuesort.Name, plqueuesort.New),
			tf.RegisterBindPlugin(defaultbinder.Name, defaultbinder.New),
		},
		"phalanx-scheduler",
		frameworkruntime.WithClientSet(client),
		frameworkruntime.WithEventRecorder(&events.FakeRecorder{}),
		frameworkruntime.WithInformerFactory(factory),
		frameworkruntime.WithPodNominator(internalqueue.NewSchedulingQueue(nil, factory)),
		frameworkruntime.WithSnapshotSharedLister(snapshot),
		frameworkruntime.WithMutableSnapshotLister(snapshot),
		frameworkruntime.WithWaitingPods(frameworkruntime.NewWaitingPodsMap()),
		frameworkruntime.WithPodsInPreBind(frameworkruntime.NewPodsInPreBindMap()),
		frameworkruntime.WithLogger(klog.Background()),
	)
	require.NoError(t, err)

	fed := groupcache.NewFed()
	for _, pg := range podGroups {
		fed.OnPodGroup(pg)
	}
	for _, p := range pods {
		fed.OnPod(p)
	}
	p := &Preemption{handle: fh, groups: fed, status: &groupstatus.Writer{}, pods: podLister, pdbs: pdbs,
		pending: map[groups.Key]*pendingEviction{}, prober: probe.New(nil)}
	p.podPreemption, p.executor, err = newPodEvaluator(ctx, fh, p)
	require.NoError(t, err)

	state := framework.NewCycleState()
	_, st, _ := fh.RunPreFilterPlugins(ctx, state, preemptor)
	require.True(t, st.IsSuccess(), "PreFilter: %v", st)
	statuses := framework.NewDefaultNodeToStatus()
	statuses.Set(node.Name, fwk.NewStatus(fwk.Unschedulable, "Insufficient cpu"))
	_, st = p.PostFilter(ctx, state, preemptor, statuses)
	require.NotEqual(t, fwk.Error, st.Code(), "PostFilter: %v", st)
	sort.Strings(evicted)
	return evicted
}

// TestLabelsAfterBindingDoNotShieldPods is the squatting tenant: pods
// labelled, while running, into a disruptionMode-all group of a higher
// priority than their own must not borrow the protection of the group's
// one pod that really has that priority. Each such pod is preempted as if
// it were in no group.
func TestLabelsAfterBindingDoNotShieldPods(t *testing.T) {
	t.Run("a plain pod of priority 1000 evicts only the low pods it needs, pod by pod", func(t *testing.T) {
		podGroups, pods := tenantA()
		evicted := preemptPlainPod(t, podGroups, pods, 16000, 1000, 3000)
		assert.Len(t, evicted, 2, "3 cpu takes two 2-cpu pods: %v", evicted)
		assert.NotContains(t, evicted, "high", "the pod that has the group's priority is not evicted")
		for _, name := range evicted {
			assert.Regexp(t, `^low-\d$`, name)
		}
	})
	t.Run("a gang of priority 1000 evicts only the low pods it needs", func(t *testing.T) {
		podGroups, pods := tenantA()
		evicted := evictedOn(t, podGroups, nil, pods, 16000, 3000)
		assert.Len(t, evicted, 2, "3 cpu takes two 2-cpu pods: %v", evicted)
		assert.NotContains(t, evicted, "high")
	})
	t.Run("a group whose PriorityClass is missing protects no pod of another priority", func(t *testing.T) {
		pg := basicGroup("crew", 0, true)
		pg.Spec.Priority = nil
		pg.Spec.PriorityClassName = "missing"
		pods := []*corev1.Pod{tenantPod("high", 1000, 2000, "crew"), tenantPod("low", 0, 2000, "crew")}
		assert.Equal(t, []string{"low"}, preemptPlainPod(t, []*v1alpha1.PodGroup{pg}, pods, 4000, 1000, 2000))
	})
	t.Run("the low pods are candidates alone, at their own priority", func(t *testing.T) {
		podGroups, pods := tenantA()
		fed := groupcache.NewFed()
		for _, pg := range podGroups {
			fed.OnPodGroup(pg)
		}
		for _, p := range pods {
			fed.OnPod(p)
		}
		p := &Preemption{groups: fed}
		for _, pod := range pods[:7] {
			assert.Equal(t, victimID{priority: 0, kind: fwk.PodKeyType}, p.victimOf(pod), pod.Name)
		}
		high := p.victimOf(pods[7])
		assert.Equal(t, int32(1000), high.priority)
		assert.Equal(t, "PodGroup ns/crew", high.unit, "a member at its group's priority stays in the group's unit")
	})
}

// TestScheduledUnitsStayWhole: a disruptionMode-all group whose members all
// have the group's priority, as the scheduler binds them, is still evicted
// whole or not at all, on both paths; a pod labelled into it at another
// priority neither joins it nor protects it.
func TestScheduledUnitsStayWhole(t *testing.T) {
	crew := func() []*corev1.Pod {
		return []*corev1.Pod{tenantPod("crew-0", 10, 2000, "crew"), tenantPod("crew-1", 10, 2000, "crew")}
	}
	tests := []struct {
		name    string
		pods    []*corev1.Pod
		nodeCPU int64
		want    []string
	}{
		{
			name:    "needing one member's room evicts the whole unit",
			pods:    crew(),
			nodeCPU: 4000,
			want:    []string{"crew-0", "crew-1"},
		},
		{
			name:    "a lower pod labelled into the unit is evicted alone rather than the unit",
			pods:    append(crew(), tenantPod("squatter", 0, 2000, "crew")),
			nodeCPU: 6000,
			want:    []string{"squatter"},
		},
		{
			name:    "a higher pod labelled into the unit does not protect it",
			pods:    append(crew(), tenantPod("vip", vipPriority, 2000, "crew")),
			nodeCPU: 6000,
			want:    []string{"crew-0", "crew-1"},
		},
	}
	for _, tt := range tests {
		podGroups := []*v1alpha1.PodGroup{basicGroup("crew", 10, true)}
		t.Run(tt.name+", for a plain pod", func(t *testing.T) {
			assert.Equal(t, tt.want, preemptPlainPod(t, podGroups, tt.pods, tt.nodeCPU, 1000, 2000))
		})
		t.Run(tt.name+", for a gang", func(t *testing.T) {
			got := evictedOn(t, podGroups, nil, tt.pods, tt.nodeCPU, 2000)
			sort.Strings(got)
			assert.Equal(t, tt.want, got)
		})
	}
}
