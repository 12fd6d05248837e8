package controller

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	kubefake "k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	"github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
	phfake "github.com/phalanx-sched/phalanx/pkg/generated/clientset/versioned/fake"
	wb "github.com/phalanx-sched/phalanx/pkg/workloadbuilder"
)

const ns = "ml"

// fixture is the controllers over fake clientsets. Informers are not
// started: objects are put into both the fake API and the informer caches,
// and tests call a controller's sync directly, so every step is
// deterministic. Assertions read the fake API, which is where writes land.
type fixture struct {
	t       *testing.T
	kube    *kubefake.Clientset
	phalanx *phfake.Clientset
	c       *Controllers
	events  *record.FakeRecorder
}

func newFixture(t *testing.T, objs ...runtime.Object) *fixture {
	t.Helper()
	var kubeObjs, phObjs []runtime.Object
	for _, o := range objs {
		switch o.(type) {
		case *v1alpha1.Workload, *v1alpha1.PodGroup, *v1alpha1.CompositePodGroup:
			phObjs = append(phObjs, o)
		default:
			kubeObjs = append(kubeObjs, o)
		}
	}
	f := &fixture{
		t:       t,
		kube:    kubefake.NewClientset(kubeObjs...),
		phalanx: phfake.NewSimpleClientset(phObjs...),
		events:  record.NewFakeRecorder(100),
	}
	var err error
	f.c, err = New(f.kube, f.phalanx, Options{EventRecorder: f.events, StatusDelay: -1})
	require.NoError(t, err)
	for _, o := range objs {
		f.cache(o)
	}
	return f
}

// cache puts (or replaces) an object in its informer cache only, as an
// informer would after a write.
func (f *fixture) cache(o runtime.Object) {
	f.t.Helper()
	var inf cache.SharedIndexInformer
	sched := f.c.phalanxInformers.Scheduling().V1alpha1()
	switch o.(type) {
	case *corev1.Pod:
		inf = f.c.kubeInformers.Core().V1().Pods().Informer()
	case *batchv1.Job:
		inf = f.c.kubeInformers.Batch().V1().Jobs().Informer()
	case *v1alpha1.Workload:
		inf = sched.Workloads().Informer()
	case *v1alpha1.PodGroup:
		inf = sched.PodGroups().Informer()
	case *v1alpha1.CompositePodGroup:
		inf = sched.CompositePodGroups().Informer()
	default:
		f.t.Fatalf("no informer for %T", o)
	}
	require.NoError(f.t, inf.GetIndexer().Update(o))
}

// drainEvents returns the Events recorded so far, as "Type Reason message".
func (f *fixture) drainEvents() []string {
	var out []string
	for {
		select {
		case e := <-f.events.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

// writes lists the mutating actions on a fake clientset, as "verb resource[/subresource]".
func writes(actions []clienttesting.Action) []string {
	var out []string
	for _, a := range actions {
		switch a.GetVerb() {
		case "get", "list", "watch":
			continue
		}
		r := a.GetResource().Resource
		if s := a.GetSubresource(); s != "" {
			r += "/" + s
		}
		out = append(out, a.GetVerb()+" "+r)
	}
	return out
}

func key(name string) cache.ObjectName { return cache.ObjectName{Namespace: ns, Name: name} }

func (f *fixture) workload(name string) *v1alpha1.Workload {
	f.t.Helper()
	w, err := f.phalanx.SchedulingV1alpha1().Workloads(ns).Get(context.Background(), name, metav1.GetOptions{})
	require.NoError(f.t, err)
	return w
}

func (f *fixture) podGroup(name string) *v1alpha1.PodGroup {
	f.t.Helper()
	pg, err := f.phalanx.SchedulingV1alpha1().PodGroups(ns).Get(context.Background(), name, metav1.GetOptions{})
	require.NoError(f.t, err)
	return pg
}

func (f *fixture) pod(name string) *corev1.Pod {
	f.t.Helper()
	p, err := f.kube.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
	require.NoError(f.t, err)
	return p
}

// gangJob is an opted-in Job whose pod template carries the gang gate.
func gangJob(name string, parallelism *int32, annotations ...string) *batchv1.Job {
	ann := map[string]string{v1alpha1.GangAnnotation: "true"}
	for i := 0; i+1 < len(annotations); i += 2 {
		ann[annotations[i]] = annotations[i+1]
	}
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, UID: types.UID("uid-job-" + name), Annotations: ann, Generation: 1},
		Spec: batchv1.JobSpec{
			Parallelism: parallelism,
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				SchedulingGates: []corev1.PodSchedulingGate{{Name: GangSchedulingGate}},
				Containers:      []corev1.Container{{Name: "main", Image: "registry.k8s.io/pause:3.10"}},
				RestartPolicy:   corev1.RestartPolicyNever,
			}},
		},
	}
}

// jobObjects are the Workload and PodGroup the controllers would have made
// for job, as stored by the API server.
func jobObjects(t *testing.T, job *batchv1.Job) (*v1alpha1.Workload, *v1alpha1.PodGroup) {
	t.Helper()
	built, errs := desiredJobWorkload(context.Background(), job, readJobGang(job), nil)
	require.Empty(t, errs)
	w := built.DeepCopy()
	w.UID = types.UID("uid-wl-" + w.Name)
	w.Generation = 1
	owner := wb.WorkloadOwnerReference(w)
	b, err := wb.NewBuilderFromExistingWorkload(w, wb.BuildOptions{Owner: &owner})
	require.NoError(t, err)
	pg, err := b.NewPodGroup(JobPodGroupName(job.Name), v1alpha1.JobTemplateName)
	require.NoError(t, err)
	pg.UID = types.UID("uid-pg-" + pg.Name)
	return w, pg
}

// jobPod is a pod the Job controller created for job, still gated.
func jobPod(job *batchv1.Job, name string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: ns, UID: types.UID("uid-pod-" + name),
			Labels:          map[string]string{"batch.kubernetes.io/job-name": job.Name},
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(job, jobKind)},
		},
		Spec: *job.Spec.Template.Spec.DeepCopy(),
	}
}

func hasEvent(events []string, parts ...string) bool {
	for _, e := range events {
		all := true
		for _, p := range parts {
			all = all && strings.Contains(e, p)
		}
		if all {
			return true
		}
	}
	return false
}
