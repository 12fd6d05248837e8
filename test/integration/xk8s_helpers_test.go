package integration

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	restclient "k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	xv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"
	xversioned "sigs.k8s.io/scheduler-plugins/pkg/generated/clientset/versioned"

	"github.com/phalanx-sched/phalanx/tools/sandbox"
)

// Helpers for the scheduling.x-k8s.io (scheduler-plugins) dialect.

// xClient is a client for scheduler-plugins' PodGroups of c (custom
// resources are served as JSON only).
func xClient(t *testing.T, c *sandbox.Cluster) xversioned.Interface {
	t.Helper()
	cfg := restclient.CopyConfig(c.Config)
	cfg.ContentType, cfg.AcceptContentTypes = "application/json", "application/json"
	x, err := xversioned.NewForConfig(cfg)
	require.NoError(t, err)
	return x
}

// xPodGroup is a scheduler-plugins PodGroup as operators create them.
func xPodGroup(name string, minMember int32, minResources corev1.ResourceList) *xv1alpha1.PodGroup {
	return &xv1alpha1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       xv1alpha1.PodGroupSpec{MinMember: minMember, MinResources: minResources},
	}
}

func createXPodGroup(t *testing.T, x xversioned.Interface, ns string, pg *xv1alpha1.PodGroup) {
	t.Helper()
	_, err := x.SchedulingV1alpha1().PodGroups(ns).Create(context.Background(), pg, metav1.CreateOptions{})
	require.NoError(t, err, "create PodGroup.scheduling.x-k8s.io %s", pg.Name)
}

// inXGroup is the label that attaches a pod to a scheduler-plugins PodGroup.
func inXGroup(name string) map[string]string {
	return map[string]string{xv1alpha1.PodGroupLabel: name}
}

// xPod is a pod of scheduler-plugins' own integration tests: one pause
// container requesting res, an optional PriorityClass, no grace period.
func xPod(name string, labels map[string]string, res corev1.ResourceList, class string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec: corev1.PodSpec{
			SchedulerName:                 "phalanx-scheduler",
			PriorityClassName:             class,
			TerminationGracePeriodSeconds: ptr.To[int64](0),
			Containers: []corev1.Container{{Name: "con0", Image: "registry.k8s.io/pause:3.10",
				Resources: corev1.ResourceRequirements{Requests: res}}},
		},
	}
}

func memoryReq(q string) corev1.ResourceList {
	return corev1.ResourceList{corev1.ResourceMemory: resource.MustParse(q)}
}

func cpuReq(q string) corev1.ResourceList {
	return corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(q)}
}

func createPodObjects(t *testing.T, c *sandbox.Cluster, ns string, pods ...*corev1.Pod) {
	t.Helper()
	for _, p := range pods {
		_, err := c.Client.CoreV1().Pods(ns).Create(context.Background(), p, metav1.CreateOptions{})
		require.NoError(t, err, "create pod %s", p.Name)
	}
}

// priorityClasses creates PriorityClasses by name and value, once per
// cluster.
func priorityClasses(t *testing.T, c *sandbox.Cluster, classes map[string]int32) {
	t.Helper()
	for name, v := range classes {
		createPriorityClasses(t, c, &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Value: v})
	}
}

// deletePodsNow deletes every Job and pod of ns without a grace period
// and waits until the pods are gone, so the next case starts on empty
// nodes.
func deletePodsNow(t *testing.T, c *sandbox.Cluster, ns string) {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, c.Client.BatchV1().Jobs(ns).DeleteCollection(ctx, metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationBackground)}, metav1.ListOptions{}))
	require.NoError(t, c.Client.CoreV1().Pods(ns).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}, metav1.ListOptions{}))
	eventually(t, 60*time.Second, "the pods of "+ns+" gone", func() (bool, error) {
		pods, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		return err == nil && len(pods.Items) == 0, err
	})
}

// xGroupEvent waits for a core/v1 event about scheduler-plugins PodGroup
// name whose message contains msg, and returns it.
func xGroupEvent(t *testing.T, c *sandbox.Cluster, ns, name, msg string) corev1.Event {
	t.Helper()
	var got corev1.Event
	eventually(t, 60*time.Second, "an event on PodGroup.scheduling.x-k8s.io "+name+" saying "+msg, func() (bool, error) {
		evs, err := c.Client.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{
			FieldSelector: "involvedObject.kind=PodGroup,involvedObject.name=" + name})
		if err != nil {
			return false, err
		}
		for _, e := range evs.Items {
			if e.InvolvedObject.APIVersion == xv1alpha1.SchemeGroupVersion.String() && strings.Contains(e.Message, msg) {
				got = e
				return true, nil
			}
		}
		return false, nil
	})
	return got
}

// waitPodEvent waits for an event about pod whose note contains msg, and
// returns the note.
func waitPodEvent(t *testing.T, c *sandbox.Cluster, ns, pod, msg string) string {
	t.Helper()
	var note string
	eventually(t, 60*time.Second, "an event on pod "+pod+" saying "+msg, func() (bool, error) {
		evs, err := c.Client.EventsV1().Events(ns).List(context.Background(), metav1.ListOptions{FieldSelector: "regarding.name=" + pod})
		if err != nil {
			return false, err
		}
		for _, e := range evs.Items {
			if strings.Contains(e.Note, msg) {
				note = e.Note
				return true, nil
			}
		}
		return false, nil
	})
	return note
}

// anyPodEvent waits for an event about any pod of ns whose note contains
// msg, and returns the note: the scheduler tells one member of a group
// what holds the group, and which member is not defined.
func anyPodEvent(t *testing.T, c *sandbox.Cluster, ns, msg string) string {
	t.Helper()
	var note string
	eventually(t, 60*time.Second, "an event on a pod of "+ns+" saying "+msg, func() (bool, error) {
		evs, err := c.Client.EventsV1().Events(ns).List(context.Background(), metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, e := range evs.Items {
			if e.Regarding.Kind == "Pod" && strings.Contains(e.Note, msg) {
				note = e.Note
				return true, nil
			}
		}
		return false, nil
	})
	return note
}
