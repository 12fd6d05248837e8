package integration

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	"github.com/phalanx-sched/phalanx/tools/sandbox"
)

// TestJobGangShrinksAsPodsFinish runs gang Jobs whose pods succeed, fail
// and are retried through upstream's Job controller: the pods that are
// still to run must always be able to form their gang.
func TestJobGangShrinksAsPodsFinish(t *testing.T) {
	c := startCluster(t, sandbox.Options{
		Topology:    &sandbox.Topology{Zones: 1, RacksPerZone: 1, NodesPerRack: 4, CPU: "1", Memory: "4Gi", Pods: 110},
		Scheduler:   true,
		NodeAgent:   true,
		Controllers: true,
	})
	ctx := context.Background()

	t.Run("completions 5, parallelism 4: the fifth pod runs once the first 4 succeeded", func(t *testing.T) {
		ns := namespace(t, c)
		job := gangJobOf("train", 4)
		job.Spec.Completions = ptr.To[int32](5)
		_, err := c.Client.BatchV1().Jobs(ns).Create(ctx, job, metav1.CreateOptions{})
		require.NoError(t, err)

		first := waitJobPodsBound(t, c, ns, "train", 4)
		for _, name := range first {
			finishPod(t, c, ns, name, corev1.PodSucceeded)
		}
		fifth := waitJobPodsBound(t, c, ns, "train", 1)
		assert.NotContains(t, first, fifth[0], "the fifth pod is a new one")
		assert.Equal(t, int32(1), jobMinCount(t, c, ns, "train"), "the gang is what remains to run")

		finishPod(t, c, ns, fifth[0], corev1.PodSucceeded)
		eventually(t, 30*time.Second, "the Job to complete", func() (bool, error) {
			j, err := c.Client.BatchV1().Jobs(ns).Get(ctx, "train", metav1.GetOptions{})
			return err == nil && j.Status.Succeeded == 5, err
		})
	})

	t.Run("completions = parallelism = 3: a pod that failed after two succeeded is retried alone", func(t *testing.T) {
		ns := namespace(t, c)
		_, err := c.Client.BatchV1().Jobs(ns).Create(ctx, gangJobOf("train", 3), metav1.CreateOptions{})
		require.NoError(t, err)

		first := waitJobPodsBound(t, c, ns, "train", 3)
		finishPod(t, c, ns, first[0], corev1.PodSucceeded)
		finishPod(t, c, ns, first[1], corev1.PodSucceeded)
		finishPod(t, c, ns, first[2], corev1.PodFailed)
		retry := waitJobPodsBound(t, c, ns, "train", 1)
		assert.NotContains(t, first, retry[0], "the retry is a new pod")
		assert.Equal(t, int32(1), jobMinCount(t, c, ns, "train"))
		finishPod(t, c, ns, retry[0], corev1.PodSucceeded)
	})

	t.Run("completions = parallelism = 3: a pod that failed while two run is retried and joins them", func(t *testing.T) {
		ns := namespace(t, c)
		_, err := c.Client.BatchV1().Jobs(ns).Create(ctx, gangJobOf("train", 3), metav1.CreateOptions{})
		require.NoError(t, err)

		first := waitJobPodsBound(t, c, ns, "train", 3)
		finishPod(t, c, ns, first[2], corev1.PodFailed)
		now := waitJobPodsBound(t, c, ns, "train", 3)
		assert.Subset(t, now, first[:2], "the two running members keep running")
		assert.Equal(t, 1, len(sets.New(now...).Difference(sets.New(first...))), "the retry joined them: %v", now)
		assert.Equal(t, int32(3), jobMinCount(t, c, ns, "train"), "nothing succeeded, so the gang is still 3")
	})
}

// waitJobPodsBound waits until exactly n pods of the Job are bound and not
// finished, and returns their names.
func waitJobPodsBound(t *testing.T, c *sandbox.Cluster, ns, job string, n int) []string {
	t.Helper()
	var names []string
	eventually(t, 60*time.Second, fmt.Sprintf("%d live pods of Job %s bound", n, job), func() (bool, error) {
		pods, err := c.Client.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: batchv1.JobNameLabel + "=" + job})
		if err != nil {
			return false, err
		}
		names = names[:0]
		for _, p := range pods.Items {
			if p.Spec.NodeName != "" && p.DeletionTimestamp == nil && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
				names = append(names, p.Name)
			}
		}
		return len(names) == n, nil
	})
	return names
}

// finishPod reports the pod's containers as exited, as a kubelet would.
func finishPod(t *testing.T, c *sandbox.Cluster, ns, name string, phase corev1.PodPhase) {
	t.Helper()
	ctx := context.Background()
	// The node agent writes the same status (Running): retry on conflict.
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		p, err := c.Client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		p.Status.Phase = phase
		_, err = c.Client.CoreV1().Pods(ns).UpdateStatus(ctx, p, metav1.UpdateOptions{})
		return err
	})
	require.NoError(t, err)
}

func jobMinCount(t *testing.T, c *sandbox.Cluster, ns, job string) int32 {
	t.Helper()
	pg, err := c.Phalanx.SchedulingV1alpha1().PodGroups(ns).Get(context.Background(), job+"-workers", metav1.GetOptions{})
	require.NoError(t, err)
	return pg.Spec.SchedulingPolicy.Gang.MinCount
}

// TestUngatedGangJobBindsWholeOrNotAtAll is a gang Job written as a new user
// might: annotated, but without the scheduling gate in its pod template.
// Its 3 full-node pods on 2 nodes must not bind 2 of 3; a third node lets
// all 3 bind.
func TestUngatedGangJobBindsWholeOrNotAtAll(t *testing.T) {
	c := startCluster(t, sandbox.Options{
		Topology:    &sandbox.Topology{Zones: 1, RacksPerZone: 1, NodesPerRack: 2, CPU: "1", Memory: "4Gi", Pods: 110},
		Scheduler:   true,
		NodeAgent:   true,
		Controllers: true,
	})
	ctx := context.Background()
	ns := namespace(t, c)
	job := gangJobOf("train", 3)
	job.Spec.Template.Spec.SchedulingGates = nil
	_, err := c.Client.BatchV1().Jobs(ns).Create(ctx, job, metav1.CreateOptions{})
	require.NoError(t, err)

	eventually(t, 60*time.Second, "3 pods of the Job attached to train-workers", func() (bool, error) {
		pods, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "scheduling.phalanx.dev/pod-group=train-workers"})
		return err == nil && len(pods.Items) == 3, err
	})
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) {
		if bound := boundPods(t, c, ns); len(bound) > 0 {
			return false, fmt.Errorf("the gang of 3 was partially bound with room for 2: %v", bound)
		}
		return false, nil
	})
	require.True(t, wait.Interrupted(err), "no pod may bind while only 2 fit: %v", err)

	capacity := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("1"),
		corev1.ResourceMemory: resource.MustParse("4Gi"),
		corev1.ResourcePods:   resource.MustParse("110"),
	}
	require.NoError(t, sandbox.CreateNodes(ctx, c.Client, []*corev1.Node{sandbox.NewNode("extra", map[string]string{
		sandbox.ZoneLabel: "zone-0", sandbox.RackLabel: "zone-0-rack-0", sandbox.HostnameLabel: "extra",
	}, capacity)}))
	eventually(t, 60*time.Second, "all 3 pods bound", func() (bool, error) {
		return len(boundPods(t, c, ns)) == 3, nil
	})
}
