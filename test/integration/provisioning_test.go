package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"

	v1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
	"github.com/phalanx-sched/phalanx/pkg/controller"
	"github.com/phalanx-sched/phalanx/pkg/provisioning"
	"github.com/phalanx-sched/phalanx/pkg/provisioning/autoscalingv1"
	"github.com/phalanx-sched/phalanx/tools/sandbox"
)

// TestGangAsksAutoscalerForItsNodes runs phalanx-controller's
// ProvisioningRequests against the sandbox's stand-in for the autoscaler's
// atomic class (4-CPU nodes, at most 6). The cluster's own two nodes have
// 2 CPUs: a gang of four 3-CPU members needs four new nodes. It gets one
// request for all four, binds whole on the nodes the stand-in adds, and
// its request and templates go with the group; a gang that fits asks for
// nothing; a gang the stand-in refuses has its condition say so and is
// asked for again after the backoff.
func TestGangAsksAutoscalerForItsNodes(t *testing.T) {
	c := startCluster(t, sandbox.Options{
		Topology:    &sandbox.Topology{Zones: 1, RacksPerZone: 1, NodesPerRack: 2, CPU: "2"},
		Scheduler:   true,
		NodeAgent:   true,
		Controllers: true,
		Provisioning: &controller.ProvisioningOptions{
			SchedulerNames: []string{"phalanx-scheduler"},
			After:          500 * time.Millisecond,
			Backoff:        provisioning.Backoff{Initial: time.Second, Max: time.Second},
		},
		StandInProvisioner: &sandbox.StandInProvisioner{CPU: "4", MaxNodes: 6},
	})
	ctx := context.Background()
	ns := namespace(t, c)
	dyn, err := dynamic.NewForConfig(c.Config)
	require.NoError(t, err)
	requests := dyn.Resource(autoscalingv1.GroupVersionResource).Namespace(ns)

	gang := func(name string, size int32, cpu string) {
		t.Helper()
		pg := gangPG(name, size)
		pg.Annotations = map[string]string{provisioning.GroupAnnotation: provisioning.ModeAtomic}
		_, err := c.Phalanx.SchedulingV1alpha1().PodGroups(ns).Create(ctx, pg, metav1.CreateOptions{})
		require.NoError(t, err)
		for i := range size {
			p := plainPod(fmt.Sprintf("%s-%d", name, i), cpu)
			p.Labels = map[string]string{v1alpha1.PodGroupLabel: name}
			_, err := c.Client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
			require.NoError(t, err)
		}
	}
	requestsFor := func(group string) []string {
		t.Helper()
		list, err := requests.List(ctx, metav1.ListOptions{LabelSelector: provisioning.ForLabel + "=" + group})
		require.NoError(t, err)
		var names []string
		for _, u := range list.Items {
			names = append(names, u.GetName())
		}
		return names
	}
	condition := func(group string) *metav1.Condition {
		t.Helper()
		pg, err := c.Phalanx.SchedulingV1alpha1().PodGroups(ns).Get(ctx, group, metav1.GetOptions{})
		require.NoError(t, err)
		return meta.FindStatusCondition(pg.Status.Conditions, provisioning.ConditionType)
	}

	gang("small", 2, "1")
	gang("big", 4, "3")

	eventually(t, 60*time.Second, "the big gang bound", func() (bool, error) {
		return len(boundPodsWithPrefix(t, c, ns, "big-")) == 4, nil
	})
	nodes, err := c.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: sandbox.StandInNodeLabel})
	require.NoError(t, err)
	added := map[string]bool{}
	for _, n := range nodes.Items {
		added[n.Name] = true
	}
	assert.Len(t, added, 4, "the stand-in adds the four nodes the request asks for")
	for pod, node := range boundPodsWithPrefix(t, c, ns, "big-") {
		assert.True(t, added[node], "%s is bound to %s, a node the stand-in added", pod, node)
	}

	reqs := requestsFor("big")
	require.Equal(t, []string{provisioning.RequestName("big", 1)}, reqs, "exactly one ProvisioningRequest for the big gang")
	u, err := requests.Get(ctx, reqs[0], metav1.GetOptions{})
	require.NoError(t, err)
	pr, err := autoscalingv1.FromUnstructured(u)
	require.NoError(t, err)
	assert.Equal(t, autoscalingv1.ClassBestEffortAtomicScaleUp, pr.Spec.ProvisioningClassName)
	require.Len(t, pr.Spec.PodSets, 1, "the members share one shape")
	assert.Equal(t, int32(4), pr.Spec.PodSets[0].Count)
	tmpl, err := c.Client.CoreV1().PodTemplates(ns).Get(ctx, pr.Spec.PodSets[0].PodTemplateRef.Name, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, "3", tmpl.Template.Spec.Containers[0].Resources.Requests.Cpu().String())
	pod, err := c.Client.CoreV1().Pods(ns).Get(ctx, "big-0", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, reqs[0], pod.Annotations[autoscalingv1.ConsumeAnnotation])
	assert.Equal(t, autoscalingv1.ClassBestEffortAtomicScaleUp, pod.Annotations[autoscalingv1.ClassAnnotation])
	eventually(t, 10*time.Second, "the big group's condition to say provisioned", func() (bool, error) {
		cond := condition("big")
		return cond != nil && cond.Status == metav1.ConditionTrue && cond.Reason == provisioning.ReasonProvisioned, nil
	})

	assert.Len(t, boundPodsWithPrefix(t, c, ns, "small-"), 2, "the small gang fits the cluster's own nodes")
	assert.Empty(t, requestsFor("small"), "a gang that fits asks for nothing")
	assert.Nil(t, condition("small"))

	t.Run("a request the autoscaler fails is reported and retried after the backoff", func(t *testing.T) {
		// Two nodes are left under the stand-in's maximum; this gang
		// needs three.
		gang("huge", 3, "3")
		eventually(t, 30*time.Second, "the second attempt", func() (bool, error) {
			names := requestsFor("huge")
			return len(names) == 1 && names[0] == provisioning.RequestName("huge", 2), nil
		})
		eventually(t, 10*time.Second, "the failure on the group", func() (bool, error) {
			cond := condition("huge")
			return cond != nil && cond.Status == metav1.ConditionFalse && cond.Reason == provisioning.ReasonFailed &&
				strings.Contains(cond.Message, "needs 3 new nodes"), nil
		})
		assert.Empty(t, boundPodsWithPrefix(t, c, ns, "huge-"), "no member binds: the stand-in added nothing")
	})

	require.NoError(t, c.Phalanx.SchedulingV1alpha1().PodGroups(ns).Delete(ctx, "big", metav1.DeleteOptions{}))
	eventually(t, 30*time.Second, "the garbage collector to remove the big group's request and templates", func() (bool, error) {
		if len(requestsFor("big")) > 0 {
			return false, nil
		}
		ts, err := c.Client.CoreV1().PodTemplates(ns).List(ctx, metav1.ListOptions{LabelSelector: provisioning.ForLabel + "=big"})
		return err == nil && len(ts.Items) == 0, err
	})
}

// boundPodsWithPrefix returns the bound pods of ns whose names start with
// prefix, with their nodes.
func boundPodsWithPrefix(t *testing.T, c *sandbox.Cluster, ns, prefix string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for name, node := range boundPods(t, c, ns) {
		if strings.HasPrefix(name, prefix) {
			out[name] = node
		}
	}
	return out
}
