package integration

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	v1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
	"github.com/phalanx-sched/phalanx/pkg/controller"
	"github.com/phalanx-sched/phalanx/tools/sandbox"
)

// TestWorkloadGroupsAreCreatedAndGarbageCollected applies the multi-level
// sample and checks the groups the Workload controller makes from it, and
// that the garbage collector removes them with the Workload.
func TestWorkloadGroupsAreCreatedAndGarbageCollected(t *testing.T) {
	c := startCluster(t, sandbox.Options{
		Topology:    &sandbox.Topology{Zones: 1, RacksPerZone: 1, NodesPerRack: 1},
		Scheduler:   true,
		NodeAgent:   true,
		Controllers: true,
	})
	ctx := context.Background()
	api := c.Phalanx.SchedulingV1alpha1()

	t.Run("the multilevel sample becomes a CompositePodGroup and two PodGroups", func(t *testing.T) {
		ns := namespace(t, c)
		data, err := os.ReadFile("../../manifests/samples/workload-multilevel.yaml")
		require.NoError(t, err)
		require.NoError(t, applyYAML(ctx, c, ns, data))

		var root *v1alpha1.CompositePodGroup
		var workers, driver *v1alpha1.PodGroup
		eventually(t, 30*time.Second, "the Workload's groups", func() (bool, error) {
			var errs [3]error
			root, errs[0] = api.CompositePodGroups(ns).Get(ctx, "multilevel-root", metav1.GetOptions{})
			workers, errs[1] = api.PodGroups(ns).Get(ctx, "multilevel-workers", metav1.GetOptions{})
			driver, errs[2] = api.PodGroups(ns).Get(ctx, "multilevel-driver", metav1.GetOptions{})
			for _, err := range errs {
				if apierrors.IsNotFound(err) {
					return false, nil
				}
				if err != nil {
					return false, err
				}
			}
			return true, nil
		})
		w, err := api.Workloads(ns).Get(ctx, "multilevel", metav1.GetOptions{})
		require.NoError(t, err)

		assert.Nil(t, root.Spec.ParentCompositePodGroupName)
		assert.Equal(t, &v1alpha1.WorkloadReference{WorkloadName: "multilevel", TemplateName: "root"}, root.Spec.WorkloadRef)
		assert.Equal(t, int32(2), root.Spec.SchedulingPolicy.Gang.MinGroupCount)
		assert.Equal(t, sandbox.ZoneLabel, root.Spec.SchedulingConstraints.Topology[0].Key)
		for _, tc := range []struct {
			pg       *v1alpha1.PodGroup
			template string
			minCount int32
		}{{workers, "workers", 8}, {driver, "driver", 1}} {
			assert.Equal(t, ptr.To("multilevel-root"), tc.pg.Spec.ParentCompositePodGroupName, tc.template)
			assert.Equal(t, &v1alpha1.WorkloadReference{WorkloadName: "multilevel", TemplateName: tc.template}, tc.pg.Spec.WorkloadRef)
			assert.Equal(t, tc.minCount, tc.pg.Spec.SchedulingPolicy.Gang.MinCount, tc.template)
			assert.Equal(t, sandbox.RackLabel, tc.pg.Spec.SchedulingConstraints.Topology[0].Key, tc.template)
		}
		// The template's minimum runtime reaches its PodGroup (the CRD
		// would prune a field it does not know).
		assert.Equal(t, ptr.To[int32](600), workers.Spec.MinRuntimeSeconds)
		assert.Nil(t, driver.Spec.MinRuntimeSeconds)
		for _, owners := range [][]metav1.OwnerReference{root.OwnerReferences, workers.OwnerReferences, driver.OwnerReferences} {
			require.Len(t, owners, 1)
			assert.Equal(t, "Workload", owners[0].Kind)
			assert.Equal(t, w.UID, owners[0].UID)
			assert.True(t, *owners[0].Controller)
			assert.True(t, *owners[0].BlockOwnerDeletion)
		}
		eventually(t, 30*time.Second, "the GroupsCreated condition", func() (bool, error) {
			w, err := api.Workloads(ns).Get(ctx, "multilevel", metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			return meta.IsStatusConditionTrue(w.Status.Conditions, controller.ConditionGroupsCreated), nil
		})

		require.NoError(t, api.Workloads(ns).Delete(ctx, "multilevel", metav1.DeleteOptions{}))
		eventually(t, 60*time.Second, "the garbage collector to delete the groups", func() (bool, error) {
			_, errRoot := api.CompositePodGroups(ns).Get(ctx, "multilevel-root", metav1.GetOptions{})
			_, errWorkers := api.PodGroups(ns).Get(ctx, "multilevel-workers", metav1.GetOptions{})
			_, errDriver := api.PodGroups(ns).Get(ctx, "multilevel-driver", metav1.GetOptions{})
			return apierrors.IsNotFound(errRoot) && apierrors.IsNotFound(errWorkers) && apierrors.IsNotFound(errDriver), nil
		})
	})

	t.Run("a Workload the schema accepts but workloadbuilder rejects gets a condition naming the field", func(t *testing.T) {
		ns := namespace(t, c)
		// The schema checks names per level only; a child named like its
		// parent would make two groups called dup-root.
		w := &v1alpha1.Workload{
			ObjectMeta: metav1.ObjectMeta{Name: "dup"},
			Spec: v1alpha1.WorkloadSpec{CompositePodGroupTemplates: []v1alpha1.CompositePodGroupTemplate{{
				CompositePodGroupTemplateFields: compositeFields("root", pgTemplate("root")),
			}}},
		}
		_, err := api.Workloads(ns).Create(ctx, w, metav1.CreateOptions{})
		require.NoError(t, err)
		var cond *metav1.Condition
		eventually(t, 30*time.Second, "the GroupsCreated condition", func() (bool, error) {
			got, err := api.Workloads(ns).Get(ctx, "dup", metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			cond = meta.FindStatusCondition(got.Status.Conditions, controller.ConditionGroupsCreated)
			return cond != nil, nil
		})
		assert.Equal(t, metav1.ConditionFalse, cond.Status)
		assert.Equal(t, v1alpha1.ReasonInvalid, cond.Reason)
		assert.Contains(t, cond.Message, `spec.compositePodGroupTemplates[0].podGroupTemplates[0].name: Duplicate value: "root"`)
		pgs, err := api.PodGroups(ns).List(ctx, metav1.ListOptions{})
		require.NoError(t, err)
		assert.Empty(t, pgs.Items, "no group is created from an invalid Workload")
	})
}

// TestJobGangWaitsForRoomThenBindsTogether runs a real annotated Job
// through upstream's Job controller, the Phalanx controllers and the
// Phalanx scheduler: 4 one-cpu pods on 3 one-cpu nodes never start 3 of
// 4; a fourth node lets all 4 bind.
func TestJobGangWaitsForRoomThenBindsTogether(t *testing.T) {
	c := startCluster(t, sandbox.Options{
		Topology:    &sandbox.Topology{Zones: 1, RacksPerZone: 1, NodesPerRack: 3, CPU: "1", Memory: "4Gi", Pods: 110},
		Scheduler:   true,
		NodeAgent:   true,
		Controllers: true,
	})
	ctx := context.Background()
	ns := namespace(t, c)
	job, err := c.Client.BatchV1().Jobs(ns).Create(ctx, gangJobOf("train", 4), metav1.CreateOptions{})
	require.NoError(t, err)

	jobPods := func() []corev1.Pod {
		pods, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "batch.kubernetes.io/job-name=train"})
		require.NoError(t, err)
		return pods.Items
	}
	eventually(t, 60*time.Second, "4 pods attached to train-workers and released", func() (bool, error) {
		pods := jobPods()
		if len(pods) != 4 {
			return false, nil
		}
		for _, p := range pods {
			if p.Labels[v1alpha1.PodGroupLabel] != "train-workers" || len(p.Spec.SchedulingGates) > 0 {
				return false, nil
			}
		}
		return true, nil
	})
	pg, err := c.Phalanx.SchedulingV1alpha1().PodGroups(ns).Get(ctx, "train-workers", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, int32(4), pg.Spec.SchedulingPolicy.Gang.MinCount, "minCount is the parallelism")
	assert.Equal(t, &v1alpha1.WorkloadReference{WorkloadName: "train", TemplateName: v1alpha1.JobTemplateName}, pg.Spec.WorkloadRef)
	w, err := c.Phalanx.SchedulingV1alpha1().Workloads(ns).Get(ctx, "train", metav1.GetOptions{})
	require.NoError(t, err)
	assert.True(t, metav1.IsControlledBy(w, job), "the Job controls its Workload")
	eventually(t, 30*time.Second, "the PodGroup to count 4 members", func() (bool, error) {
		pg, err := c.Phalanx.SchedulingV1alpha1().PodGroups(ns).Get(ctx, "train-workers", metav1.GetOptions{})
		return err == nil && pg.Status.Members == 4, err
	})

	// Room for 3 of 4: the gang must not start partially. Every poll in the
	// window must see no pod bound; a poll that sees one fails the test.
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) {
		if bound := boundPods(t, c, ns); len(bound) > 0 {
			return false, fmt.Errorf("the gang of 4 was partially bound with room for 3: %v", bound)
		}
		return false, nil
	})
	require.True(t, wait.Interrupted(err), "no pod may bind while only 3 fit: %v", err)

	capacity := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("1"),
		corev1.ResourceMemory: resource.MustParse("4Gi"),
		corev1.ResourcePods:   resource.MustParse("110"),
	}
	require.NoError(t, sandbox.CreateNodes(ctx, c.Client, []*corev1.Node{sandbox.NewNode("extra", map[string]string{
		sandbox.ZoneLabel: "zone-0", sandbox.RackLabel: "zone-0-rack-0", sandbox.HostnameLabel: "extra",
	}, capacity)}))
	eventually(t, 60*time.Second, "all 4 pods bound", func() (bool, error) {
		return len(boundPods(t, c, ns)) == 4, nil
	})
	nodes := map[string]bool{}
	for _, node := range boundPods(t, c, ns) {
		nodes[node] = true
	}
	assert.Len(t, nodes, 4, "one pod per one-cpu node")
	eventually(t, 30*time.Second, "the PodGroup to count 4 scheduled and running", func() (bool, error) {
		pg, err := c.Phalanx.SchedulingV1alpha1().PodGroups(ns).Get(ctx, "train-workers", metav1.GetOptions{})
		return err == nil && pg.Status.Scheduled == 4 && pg.Status.Running == 4, err
	})

	t.Run("scaling the Job down lowers the gang's minCount", func(t *testing.T) {
		patch := []byte(`{"spec":{"parallelism":3}}`)
		_, err := c.Client.BatchV1().Jobs(ns).Patch(ctx, "train", types.MergePatchType, patch, metav1.PatchOptions{})
		require.NoError(t, err)
		eventually(t, 30*time.Second, "minCount 3 on the PodGroup and the Workload", func() (bool, error) {
			pg, err := c.Phalanx.SchedulingV1alpha1().PodGroups(ns).Get(ctx, "train-workers", metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			w, err := c.Phalanx.SchedulingV1alpha1().Workloads(ns).Get(ctx, "train", metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			return pg.Spec.SchedulingPolicy.Gang.MinCount == 3 && w.Spec.PodGroupTemplates[0].SchedulingPolicy.Gang.MinCount == 3, nil
		})
		eventually(t, 30*time.Second, "the PodGroup to count 3 members", func() (bool, error) {
			pg, err := c.Phalanx.SchedulingV1alpha1().PodGroups(ns).Get(ctx, "train-workers", metav1.GetOptions{})
			return err == nil && pg.Status.Members == 3, err
		})
	})
}

// gangJobOf is an annotated Job of n one-cpu pods whose template carries
// the gang scheduling gate.
func gangJobOf(name string, n int32) *batchv1.Job {
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{v1alpha1.GangAnnotation: "true"}},
		Spec: batchv1.JobSpec{
			Parallelism: ptr.To(n),
			Completions: ptr.To(n),
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				SchedulerName:   "phalanx-scheduler",
				SchedulingGates: []corev1.PodSchedulingGate{{Name: controller.GangSchedulingGate}},
				RestartPolicy:   corev1.RestartPolicyNever,
				Containers: []corev1.Container{{
					Name:  "worker",
					Image: "registry.k8s.io/pause:3.10",
					Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
						corev1.ResourceCPU: resource.MustParse("1"),
					}},
				}},
			}},
		},
	}
}
