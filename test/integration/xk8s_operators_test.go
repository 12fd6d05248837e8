package integration

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	xv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"
	xversioned "sigs.k8s.io/scheduler-plugins/pkg/generated/clientset/versioned"

	"github.com/phalanx-sched/phalanx/tools/sandbox"
)

// TestOperatorManifestsAreGangScheduled applies, unchanged, the objects that
// Kubeflow Trainer v2, the Kubeflow Training Operator, the MPI Operator,
// KubeRay and the Spark operator create when they are set up for
// scheduler-plugins (manifests/samples/scheduler-plugins, each file says
// what it is and what differs from the operator's output). Each job is
// first offered a cluster with room for all but one cpu of it: nothing of it
// binds, and its PodGroup says why. Once the room is there, all of its pods
// bind and its PodGroup turns Running.
func TestOperatorManifestsAreGangScheduled(t *testing.T) {
	// KubeRay writes schedulerName scheduler-plugins-scheduler itself:
	// Phalanx serves that name too, as a cluster replacing scheduler-plugins
	// would.
	c := startCluster(t, sandbox.Options{Scheduler: true, Controllers: true, NodeAgent: true, SchedulerPluginsCRD: true,
		ExtraSchedulerNames: []string{"scheduler-plugins-scheduler"}})
	ctx := context.Background()
	const nodes, nodeCPU = 4, 8
	addNodes(t, c, "n", nodes, fmt.Sprint(nodeCPU), 2)
	x := xClient(t, c)
	priorityClasses(t, c, map[string]int32{"operators-filler": 1000000})

	for _, tc := range []struct {
		file, group string
		pods        int
		cpu         int // the job's cpu requests in all
	}{
		{"kubeflow-trainer-torch.yaml", "llm-finetune", 4, 8},
		{"training-operator-pytorchjob.yaml", "pytorch-mnist", 3, 6},
		{"mpi-operator-mpijob.yaml", "pi", 3, 3},
		{"kuberay-raycluster.yaml", "raycluster-kuberay", 3, 3},
		{"spark-operator-sparkapplication.yaml", "spark-pi-pg", 3, 3},
	} {
		t.Run(tc.file, func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join(repoRoot, "manifests/samples/scheduler-plugins", tc.file))
			require.NoError(t, err)
			ns := namespace(t, c)
			defer deletePodsNow(t, c, ns)

			// Fillers of the highest priority, pinned to nodes, leave one
			// cpu less than the job asks for.
			fill := nodes*nodeCPU - tc.cpu + 1
			for i := 0; fill > 0; i++ {
				n := min(fill, nodeCPU)
				p := xPod(fmt.Sprintf("filler-%d", i), nil, cpuReq(fmt.Sprint(n)), "operators-filler")
				p.Spec.NodeName = fmt.Sprintf("n-%d", i)
				createPodObjects(t, c, ns, p)
				fill -= n
			}
			require.NoError(t, applyYAML(ctx, c, ns, data), "the operator's objects apply unchanged")
			members := func() (all, bound int) {
				pods, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: xv1alpha1.PodGroupLabel + "=" + tc.group})
				require.NoError(t, err)
				for _, p := range pods.Items {
					all++
					if p.Spec.NodeName != "" {
						bound++
					}
				}
				return all, bound
			}
			eventually(t, 60*time.Second, fmt.Sprintf("%d pods of the job exist", tc.pods), func() (bool, error) {
				all, _ := members()
				return all == tc.pods, nil
			})
			e := xGroupEvent(t, c, ns, tc.group, "waiting for free capacity: minResources of PodGroup.scheduling.x-k8s.io "+ns+"/"+tc.group)
			t.Logf("held: %s", e.Message)
			consistently(t, 3*time.Second, "no pod of the job bound while it does not fit whole", func() bool {
				_, bound := members()
				return bound == 0
			})
			assert.Equal(t, xv1alpha1.PodGroupScheduling, phaseOf(t, x, ns, tc.group), "its pods exist: Scheduling")

			require.NoError(t, c.Client.CoreV1().Pods(ns).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)},
				metav1.ListOptions{LabelSelector: "!" + xv1alpha1.PodGroupLabel}))
			eventually(t, 90*time.Second, fmt.Sprintf("all %d pods of the job bound", tc.pods), func() (bool, error) {
				_, bound := members()
				return bound == tc.pods, nil
			})
			eventually(t, 60*time.Second, "the PodGroup Running", func() (bool, error) {
				return phaseOf(t, x, ns, tc.group) == xv1alpha1.PodGroupRunning, nil
			})
		})
	}
}

func phaseOf(t *testing.T, x xversioned.Interface, ns, name string) xv1alpha1.PodGroupPhase {
	t.Helper()
	pg, err := x.SchedulingV1alpha1().PodGroups(ns).Get(context.Background(), name, metav1.GetOptions{})
	require.NoError(t, err)
	return pg.Status.Phase
}
