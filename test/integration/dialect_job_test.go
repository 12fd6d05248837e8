package integration

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	schedv1alpha3 "k8s.io/api/scheduling/v1alpha3"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/utils/ptr"

	"github.com/phalanx-sched/phalanx/tools/sandbox"
)

// upstreamGangJob is a batch/v1 Job that opts into gang scheduling through
// upstream's own spec.scheduling field: no Phalanx annotation, label or
// scheduling gate. Under WorkloadWithJob the upstream Job controller
// creates its Workload and PodGroup and sets spec.schedulingGroup on its
// pods.
func upstreamGangJob(name string, n int32, cpu, topologyKey string) *batchv1.Job {
	j := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: batchv1.JobSpec{
			Parallelism: ptr.To(n),
			Completions: ptr.To(n),
			Scheduling: &batchv1.JobSchedulingConfiguration{
				SchedulingPolicy: &schedv1alpha3.WorkloadPodGroupSchedulingPolicy{
					Gang: &schedv1alpha3.WorkloadPodGroupGangSchedulingPolicy{MinCount: ptr.To(n)}},
			},
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				SchedulerName: "phalanx-scheduler",
				RestartPolicy: corev1.RestartPolicyNever,
				Containers: []corev1.Container{{
					Name: "worker", Image: "registry.k8s.io/pause:3.10",
					Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}},
				}},
			}},
		},
	}
	if topologyKey != "" {
		j.Spec.Scheduling.SchedulingConstraints = &schedv1alpha3.WorkloadPodGroupSchedulingConstraints{
			Topology: []schedv1alpha3.TopologyConstraint{{Key: topologyKey}}}
	}
	return j
}

// TestUpstreamJobController: a Job opted into gang scheduling through
// upstream's spec.scheduling, with upstream's own Job controller creating
// the Workload, the PodGroup and the pods, is gang-scheduled by Phalanx end
// to end: whole or not at all, in its topology domain, and through its
// succeed, fail and retry paths.
func TestUpstreamJobController(t *testing.T) {
	c := startCluster(t, sandbox.Options{
		Topology:  &sandbox.Topology{Zones: 1, RacksPerZone: 2, NodesPerRack: 2, CPU: "8", Memory: "64Gi", Pods: 110},
		Scheduler: true, NodeAgent: true, Controllers: true, JobWorkloads: true,
	})
	ctx := context.Background()

	t.Run("the gang binds whole in one rack and the Job succeeds", func(t *testing.T) {
		ns := namespace(t, c)
		_, err := c.Client.BatchV1().Jobs(ns).Create(ctx, upstreamGangJob("train", 4, "4", sandbox.RackLabel), metav1.CreateOptions{})
		require.NoError(t, err)
		names := waitJobPodsBound(t, c, ns, "train", 4)
		pods, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: batchv1.JobNameLabel + "=train"})
		require.NoError(t, err)
		for _, p := range pods.Items {
			require.NotNil(t, p.Spec.SchedulingGroup, "the Job controller attached %s to its PodGroup", p.Name)
		}
		assert.Len(t, domainsOf(t, c, ns, "train-", sandbox.RackLabel), 1, "the rack constraint holds")
		pgs, err := c.Client.SchedulingV1beta1().PodGroups(ns).List(ctx, metav1.ListOptions{})
		require.NoError(t, err)
		require.Len(t, pgs.Items, 1, "the Job controller created one PodGroup")
		eventually(t, 30*time.Second, "PodGroupInitiallyScheduled=True on the Job's PodGroup", func() (bool, error) {
			cond := nativeCondition(t, c, ns, pgs.Items[0].Name)
			return cond != nil && cond.Status == metav1.ConditionTrue, nil
		})
		for _, name := range names {
			finishPod(t, c, ns, name, corev1.PodSucceeded)
		}
		eventually(t, 30*time.Second, "the Job to complete", func() (bool, error) {
			j, err := c.Client.BatchV1().Jobs(ns).Get(ctx, "train", metav1.GetOptions{})
			return err == nil && j.Status.Succeeded == 4, err
		})
	})

	t.Run("the upstream-job sample binds whole in one rack", func(t *testing.T) {
		ns := namespace(t, c)
		data, err := os.ReadFile("../../manifests/samples/upstream-job.yaml")
		require.NoError(t, err)
		require.NoError(t, applyYAML(ctx, c, ns, data))
		names := waitJobPodsBound(t, c, ns, "upstream-gang-job", 4)
		assert.Len(t, domainsOf(t, c, ns, "upstream-gang-job-", sandbox.RackLabel), 1)
		for _, name := range names {
			finishPod(t, c, ns, name, corev1.PodSucceeded)
		}
	})

	t.Run("the upstream-gang sample binds whole in one rack", func(t *testing.T) {
		ns := namespace(t, c)
		data, err := os.ReadFile("../../manifests/samples/upstream-gang.yaml")
		require.NoError(t, err)
		require.NoError(t, applyYAML(ctx, c, ns, data))
		names := waitJobPodsBound(t, c, ns, "trainer", 4)
		assert.Len(t, domainsOf(t, c, ns, "trainer-", sandbox.RackLabel), 1)
		for _, name := range names {
			finishPod(t, c, ns, name, corev1.PodSucceeded)
		}
	})

	t.Run("a gang larger than any rack binds nothing", func(t *testing.T) {
		ns := namespace(t, c)
		// 5 × 4 cpu: a rack holds 4.
		_, err := c.Client.BatchV1().Jobs(ns).Create(ctx, upstreamGangJob("wide", 5, "4", sandbox.RackLabel), metav1.CreateOptions{})
		require.NoError(t, err)
		eventually(t, 60*time.Second, "the Job's 5 pods to exist and its PodGroup to say why it waits", func() (bool, error) {
			pgs, err := c.Client.SchedulingV1beta1().PodGroups(ns).List(ctx, metav1.ListOptions{})
			if err != nil || len(pgs.Items) != 1 {
				return false, err
			}
			cond := nativeCondition(t, c, ns, pgs.Items[0].Name)
			return cond != nil && cond.Status == metav1.ConditionFalse && contains(cond.Message, sandbox.RackLabel), nil
		})
		assert.Empty(t, boundPods(t, c, ns), "nothing of the gang binds")
	})

	t.Run("a member that fails while the others run is retried and joins them", func(t *testing.T) {
		ns := namespace(t, c)
		_, err := c.Client.BatchV1().Jobs(ns).Create(ctx, upstreamGangJob("retry", 3, "2", ""), metav1.CreateOptions{})
		require.NoError(t, err)
		first := waitJobPodsBound(t, c, ns, "retry", 3)
		finishPod(t, c, ns, first[2], corev1.PodFailed)
		now := waitJobPodsBound(t, c, ns, "retry", 3)
		assert.Subset(t, now, first[:2], "the two running members keep running")
		assert.Equal(t, 1, sets.New(now...).Difference(sets.New(first...)).Len(), "the retry joined them: %v", now)
		for _, name := range now {
			finishPod(t, c, ns, name, corev1.PodSucceeded)
		}
		eventually(t, 30*time.Second, "the Job to complete", func() (bool, error) {
			j, err := c.Client.BatchV1().Jobs(ns).Get(ctx, "retry", metav1.GetOptions{})
			return err == nil && j.Status.Succeeded == 3, err
		})
	})
}
