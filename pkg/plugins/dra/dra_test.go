package dra

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/dynamic-resource-allocation/resourceslice/tracker"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/defaultbinder"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/dynamicresources"
	plfeature "k8s.io/kubernetes/pkg/scheduler/framework/plugins/feature"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/queuesort"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	"k8s.io/kubernetes/pkg/scheduler/metrics"
	tf "k8s.io/kubernetes/pkg/scheduler/testing/framework"
	"k8s.io/kubernetes/pkg/scheduler/util/assumecache"
	"k8s.io/utils/ptr"

	"github.com/phalanx-sched/phalanx/pkg/plugins/pluginrt"
)

func init() { metrics.Register() }

// TestPodsWithClaimsAreNotHeldWhileTheSchedulerLists: at start the pods
// arrive before their claims are in the claim cache, and upstream's
// PreEnqueue held each such pod, so that every slice, claim and node the
// informers then listed had the queue weigh all of them again. Until the
// scheduler has its first lists the plugin lets them in; after, a pod
// whose claim does not exist is held as upstream holds it.
func TestPodsWithClaimsAreNotHeldWhileTheSchedulerLists(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	client := fake.NewClientset()
	factory := informers.NewSharedInformerFactory(client, 0)
	claims := assumecache.NewAssumeCache(klog.Background(), factory.Resource().V1().ResourceClaims().Informer(), "ResourceClaim", "", nil)
	slices, err := tracker.StartTracker(ctx, tracker.Options{SliceInformer: factory.Resource().V1().ResourceSlices(), KubeClient: client})
	if err != nil {
		t.Fatal(err)
	}
	fw, err := tf.NewFramework(ctx, []tf.RegisterPluginFunc{
		tf.RegisterQueueSortPlugin(queuesort.Name, queuesort.New),
		tf.RegisterBindPlugin(defaultbinder.Name, defaultbinder.New),
	}, "phalanx-scheduler",
		frameworkruntime.WithClientSet(client), frameworkruntime.WithInformerFactory(factory),
		frameworkruntime.WithSharedDRAManager(dynamicresources.NewDRAManager(ctx, claims, slices, factory)))
	if err != nil {
		t.Fatal(err)
	}
	args, err := decodeArgs(nil)
	if err != nil {
		t.Fatal(err)
	}
	upstream, err := dynamicresources.New(ctx, args, fw, plfeature.NewSchedulerFeaturesFromGates(utilfeature.DefaultFeatureGate))
	if err != nil {
		t.Fatal(err)
	}
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	rt := pluginrt.New()
	pl := &plugin{DynamicResources: upstream.(*dynamicresources.DynamicResources), rt: rt}

	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "trainer-0"}, Spec: corev1.PodSpec{
		ResourceClaims: []corev1.PodResourceClaim{{Name: "gpus", ResourceClaimName: ptr.To("trainer-0-gpus")}},
	}}
	if st := pl.PreEnqueue(ctx, pod); !st.IsSuccess() {
		t.Fatalf("while the scheduler lists, a pod whose claim is not in the cache yet is let in; got %v", st)
	}
	rt.MarkListed()
	st := pl.PreEnqueue(ctx, pod)
	if st.Code() != fwk.UnschedulableAndUnresolvable {
		t.Fatalf("once listed, a pod whose claim does not exist is held as upstream holds it; got %v", st)
	}
	t.Logf("held: %v", st.Message())
}
