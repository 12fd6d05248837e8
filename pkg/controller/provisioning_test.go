package controller

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	fakediscovery "k8s.io/client-go/discovery/fake"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"

	"github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
	phfake "github.com/phalanx-sched/phalanx/pkg/generated/clientset/versioned/fake"
	"github.com/phalanx-sched/phalanx/pkg/provisioning"
	"github.com/phalanx-sched/phalanx/pkg/provisioning/autoscalingv1"
)

// provFixture is the controllers with provisioning on, over fake clients;
// as in fixture, caches are filled by hand and sync is called directly.
type provFixture struct {
	*fixture
	dyn *dynamicfake.FakeDynamicClient
	now time.Time
}

func newProvFixture(t *testing.T, objs ...runtime.Object) *provFixture {
	t.Helper()
	var kubeObjs, phObjs []runtime.Object
	for _, o := range objs {
		switch o.(type) {
		case *v1alpha1.PodGroup, *v1alpha1.Workload:
			phObjs = append(phObjs, o)
		default:
			kubeObjs = append(kubeObjs, o)
		}
	}
	kube := kubefake.NewClientset(kubeObjs...)
	kube.Discovery().(*fakediscovery.FakeDiscovery).Resources = []*metav1.APIResourceList{{
		GroupVersion: autoscalingv1.Group + "/" + autoscalingv1.Version,
		APIResources: []metav1.APIResource{{Name: autoscalingv1.Resource, Kind: autoscalingv1.Kind, Namespaced: true}},
	}}
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{autoscalingv1.GroupVersionResource: autoscalingv1.Kind + "List"})
	f := &provFixture{
		fixture: &fixture{t: t, kube: kube, phalanx: phfake.NewSimpleClientset(phObjs...), events: record.NewFakeRecorder(100)},
		dyn:     dyn,
		now:     time.Now(),
	}
	var err error
	f.c, err = New(f.kube, f.phalanx, Options{EventRecorder: f.events, StatusDelay: -1, Provisioning: &ProvisioningOptions{
		Client: dyn, SchedulerNames: []string{"phalanx-scheduler"}, After: 10 * time.Second,
		Backoff: provisioning.Backoff{Initial: time.Minute, Max: time.Hour},
	}})
	require.NoError(t, err)
	f.c.provisioning.now = func() time.Time { return f.now }
	for _, o := range objs {
		f.cache(o)
	}
	return f
}

// request stores a request of the group in the fake API and the cache.
func (f *provFixture) request(pg *v1alpha1.PodGroup, attempt int, conds ...metav1.Condition) {
	f.t.Helper()
	name := provisioning.RequestName(pg.Name, attempt)
	pr := &autoscalingv1.ProvisioningRequest{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: ns, UID: types.UID("uid-" + name),
			Labels:          map[string]string{provisioning.ForLabel: pg.Name},
			Annotations:     map[string]string{provisioning.AttemptAnnotation: strings.TrimPrefix(name, pg.Name+"-provreq-")},
			OwnerReferences: []metav1.OwnerReference{groupOwner(pg)},
		},
		Spec: autoscalingv1.ProvisioningRequestSpec{
			ProvisioningClassName: autoscalingv1.ClassBestEffortAtomicScaleUp,
			PodSets:               []autoscalingv1.PodSet{{PodTemplateRef: autoscalingv1.Reference{Name: provisioning.TemplateName(name, 0)}, Count: 2}},
		},
		Status: autoscalingv1.ProvisioningRequestStatus{Conditions: conds},
	}
	u, err := autoscalingv1.ToUnstructured(pr)
	require.NoError(f.t, err)
	_, err = f.dyn.Resource(autoscalingv1.GroupVersionResource).Namespace(ns).Create(context.Background(), u, metav1.CreateOptions{})
	require.NoError(f.t, err)
	require.NoError(f.t, f.c.provisioning.reqIndex.Add(u))
	_, err = f.kube.CoreV1().PodTemplates(ns).Create(context.Background(), &corev1.PodTemplate{ObjectMeta: metav1.ObjectMeta{Name: provisioning.TemplateName(name, 0), Namespace: ns}}, metav1.CreateOptions{})
	require.NoError(f.t, err)
}

func (f *provFixture) requestNames() []string {
	f.t.Helper()
	list, err := f.dyn.Resource(autoscalingv1.GroupVersionResource).Namespace(ns).List(context.Background(), metav1.ListOptions{})
	require.NoError(f.t, err)
	var out []string
	for _, u := range list.Items {
		out = append(out, u.GetName())
	}
	return out
}

func (f *provFixture) sync(name string) {
	f.t.Helper()
	require.NoError(f.t, f.c.provisioning.sync(context.Background(), key(name)))
}

// shortGang is an opted-in gang of two 8-CPU members that the scheduler
// found no room for a minute ago.
func shortGang(now time.Time) (*v1alpha1.PodGroup, []*corev1.Pod) {
	pg := &v1alpha1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Name: "train", Namespace: ns, UID: "uid-pg-train",
			Annotations: map[string]string{provisioning.GroupAnnotation: provisioning.ModeAtomic}},
		Spec: v1alpha1.PodGroupSpec{SchedulingPolicy: v1alpha1.PodGroupSchedulingPolicy{Gang: &v1alpha1.GangSchedulingPolicy{MinCount: 2}}},
		Status: v1alpha1.PodGroupStatus{Conditions: []metav1.Condition{{
			Type: v1alpha1.PodGroupSchedulable, Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonUnschedulable,
			Message: "no node fits", LastTransitionTime: metav1.NewTime(now.Add(-time.Minute)),
		}}},
	}
	var pods []*corev1.Pod
	for _, n := range []string{"train-0", "train-1"} {
		pods = append(pods, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: n, Namespace: ns, UID: types.UID("uid-" + n), Labels: map[string]string{v1alpha1.PodGroupLabel: "train"}},
			Spec: corev1.PodSpec{SchedulerName: "phalanx-scheduler", Containers: []corev1.Container{{
				Name: "main", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8")}},
			}}},
		})
	}
	return pg, pods
}

func objects(pg *v1alpha1.PodGroup, pods []*corev1.Pod) []runtime.Object {
	out := []runtime.Object{pg}
	for _, p := range pods {
		out = append(out, p)
	}
	return out
}

func TestProvisioningRetriesAFailedRequestOnlyAfterTheBackoff(t *testing.T) {
	now := time.Now()
	pg, pods := shortGang(now)
	f := newProvFixture(t, objects(pg, pods)...)
	f.now = now
	failedAt := metav1.NewTime(now.Add(-10 * time.Second))
	f.request(pg, 1,
		metav1.Condition{Type: autoscalingv1.Provisioned, Status: metav1.ConditionFalse, Reason: autoscalingv1.ReasonCapacityIsNotFound, LastTransitionTime: failedAt},
		metav1.Condition{Type: autoscalingv1.Failed, Status: metav1.ConditionTrue, Reason: autoscalingv1.ReasonCapacityIsNotFound, Message: "quota", LastTransitionTime: failedAt})

	f.sync("train")
	assert.Equal(t, []string{"train-provreq-1"}, f.requestNames(), "no new attempt within the backoff")
	cond := meta.FindStatusCondition(f.podGroup("train").Status.Conditions, provisioning.ConditionType)
	require.NotNil(t, cond)
	assert.Equal(t, metav1.ConditionFalse, cond.Status)
	assert.Equal(t, provisioning.ReasonFailed, cond.Reason)
	assert.Contains(t, cond.Message, "CapacityIsNotFound: quota")
	assert.Contains(t, cond.Message, "attempt 2 not before "+failedAt.Add(time.Minute).UTC().Format(time.RFC3339))
	assert.NotNil(t, meta.FindStatusCondition(f.podGroup("train").Status.Conditions, v1alpha1.PodGroupSchedulable), "the scheduler's condition is kept")

	f.now = now.Add(time.Minute)
	f.sync("train")
	assert.Equal(t, []string{"train-provreq-2"}, f.requestNames(), "the second attempt replaces the first")
	_, err := f.kube.CoreV1().PodTemplates(ns).Get(context.Background(), "train-provreq-1-0", metav1.GetOptions{})
	assert.True(t, err != nil, "the first attempt's template goes with it")
	tmpl, err := f.kube.CoreV1().PodTemplates(ns).Get(context.Background(), "train-provreq-2-0", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, "uid-pg-train", string(tmpl.OwnerReferences[0].UID), "owned by the group")
	for _, p := range pods {
		assert.Equal(t, "train-provreq-2", f.pod(p.Name).Annotations[autoscalingv1.ConsumeAnnotation], p.Name)
	}
}

func TestProvisioningDropsAnUnansweredRequestWhenTheGangBinds(t *testing.T) {
	now := time.Now()
	pg, pods := shortGang(now)
	for _, p := range pods {
		p.Spec.NodeName = "n1"
	}
	f := newProvFixture(t, objects(pg, pods)...)
	f.now = now
	f.request(pg, 1, metav1.Condition{Type: autoscalingv1.Accepted, Status: metav1.ConditionTrue, Reason: autoscalingv1.ReasonAccepted, LastTransitionTime: metav1.NewTime(now)})
	f.sync("train")
	assert.Empty(t, f.requestNames(), "the autoscaler need not add nodes the gang no longer needs")
	cond := meta.FindStatusCondition(f.podGroup("train").Status.Conditions, provisioning.ConditionType)
	require.NotNil(t, cond)
	assert.Equal(t, provisioning.ReasonNotNeeded, cond.Reason)
}

func TestProvisioningAsksOnlyForOptedInGangsOfItsProfiles(t *testing.T) {
	now := time.Now()
	for name, mutate := range map[string]func(*v1alpha1.PodGroup, []*corev1.Pod){
		"not annotated":   func(pg *v1alpha1.PodGroup, _ []*corev1.Pod) { pg.Annotations = nil },
		"another profile": func(_ *v1alpha1.PodGroup, pods []*corev1.Pod) { pods[1].Spec.SchedulerName = "default-scheduler" },
		"invalid":         func(pg *v1alpha1.PodGroup, _ []*corev1.Pod) { pg.Status.Conditions[0].Reason = v1alpha1.ReasonInvalid },
		"short only just now": func(pg *v1alpha1.PodGroup, _ []*corev1.Pod) {
			pg.Status.Conditions[0].LastTransitionTime = metav1.NewTime(now)
		},
	} {
		t.Run(name, func(t *testing.T) {
			pg, pods := shortGang(now)
			mutate(pg, pods)
			f := newProvFixture(t, objects(pg, pods)...)
			f.now = now
			f.sync("train")
			assert.Empty(t, f.requestNames())
		})
	}
	pg, pods := shortGang(now)
	f := newProvFixture(t, objects(pg, pods)...)
	f.now = now
	f.sync("train")
	assert.Equal(t, []string{"train-provreq-1"}, f.requestNames(), "the unchanged gang asks")
}

// A gang Job's PodGroup is made by the controllers, so the opt-in is read
// from the Job (through its Workload) when the group has none of its own.
func TestProvisioningReadsTheOptInFromTheGangJob(t *testing.T) {
	now := time.Now()
	job := gangJob("train", ptrTo(int32(2)), provisioning.GroupAnnotation, provisioning.ModeAtomic)
	w, pg := jobObjects(t, job)
	short, pods := shortGang(now)
	pg.Status = short.Status
	for _, p := range pods {
		p.Labels[v1alpha1.PodGroupLabel] = pg.Name
	}
	f := newProvFixture(t, append(objects(pg, pods), w, job)...)
	f.now = now
	f.sync(pg.Name)
	assert.Equal(t, []string{provisioning.RequestName(pg.Name, 1)}, f.requestNames())

	job.Annotations[provisioning.GroupAnnotation] = "off"
	g := newProvFixture(t, append(objects(pg, pods), w, job)...)
	g.now = now
	g.sync(pg.Name)
	assert.Empty(t, g.requestNames(), "any other value is off")
}
