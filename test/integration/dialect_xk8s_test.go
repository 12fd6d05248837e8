package integration

import (
	"context"
	"fmt"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	restclient "k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	xv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"
	xversioned "sigs.k8s.io/scheduler-plugins/pkg/generated/clientset/versioned"

	v1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
	"github.com/phalanx-sched/phalanx/pkg/gangcore"
	"github.com/phalanx-sched/phalanx/tools/sandbox"
)

// TestSchedulerPluginsDialect: scheduler-plugins' scheduling.x-k8s.io
// PodGroups, with nothing of Phalanx's API in sight, are gang-scheduled by
// Phalanx, their status is kept as scheduler-plugins' controller keeps it,
// and what is wrong with them is said on the pods and on the PodGroup.
// Four nodes of 8 cpu; each case cleans up its pods.
func TestSchedulerPluginsDialect(t *testing.T) {
	c := startCluster(t, sandbox.Options{Scheduler: true, Controllers: true, NodeAgent: true, SchedulerPluginsCRD: true})
	addNodes(t, c, "n", 4, "8", 0)
	x := xClient(t, c)
	ctx := context.Background()
	priorityClasses(t, c, map[string]int32{"x-low": 10, "x-high": 1000})
	group := func(t *testing.T, ns, name string) *xv1alpha1.PodGroup {
		pg, err := x.SchedulingV1alpha1().PodGroups(ns).Get(ctx, name, metav1.GetOptions{})
		require.NoError(t, err)
		return pg
	}
	phase := func(t *testing.T, ns, name string, want xv1alpha1.PodGroupPhase) *xv1alpha1.PodGroup {
		t.Helper()
		var pg *xv1alpha1.PodGroup
		eventually(t, 60*time.Second, fmt.Sprintf("PodGroup %s in phase %s", name, want), func() (bool, error) {
			pg = group(t, ns, name)
			return pg.Status.Phase == want, nil
		})
		return pg
	}
	xMembers := func(group string, n int, req corev1.ResourceList, class string) []*corev1.Pod {
		var out []*corev1.Pod
		for i := range n {
			out = append(out, xPod(fmt.Sprintf("%s-%d", group, i), inXGroup(group), req, class))
		}
		return out
	}

	t.Run("a gang binds whole and its status runs through scheduler-plugins' phases", func(t *testing.T) {
		ns := namespace(t, c)
		defer deletePodsNow(t, c, ns)
		createXPodGroup(t, x, ns, xPodGroup("train", 3, nil))
		phase(t, ns, "train", xv1alpha1.PodGroupPending)
		// The pods have an owner, as every operator's pods do (one that
		// exists, or the garbage collector would delete them).
		owner, err := c.Client.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "owner"}}, metav1.CreateOptions{})
		require.NoError(t, err)
		pods := xMembers("train", 3, cpuReq("2"), "")
		for _, p := range pods {
			p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: owner.Name, UID: owner.UID}}
		}
		createPodObjects(t, c, ns, pods[:2]...)
		anyPodEvent(t, c, ns, "waiting for pods: 2/3 present (PodGroup.scheduling.x-k8s.io "+ns+"/train)")
		assert.Equal(t, xv1alpha1.PodGroupPending, group(t, ns, "train").Status.Phase, "fewer than minMember pods: Pending")
		assert.Empty(t, boundPods(t, c, ns))
		createPodObjects(t, c, ns, pods[2])
		eventually(t, 60*time.Second, "all 3 bound", func() (bool, error) { return boundWithPrefix(t, c, ns, "train-") == 3, nil })
		pg := phase(t, ns, "train", xv1alpha1.PodGroupRunning)
		assert.Equal(t, int32(3), pg.Status.Running)
		assert.Equal(t, ns+"/owner", pg.Status.OccupiedBy, "occupiedBy names the pods' owner")
		assert.False(t, pg.Status.ScheduleStartTime.IsZero(), "scheduleStartTime is set when scheduling starts")
		xGroupEvent(t, c, ns, "train", "3 pods bound")

		for _, name := range []string{"train-0", "train-1", "train-2"} {
			p, err := c.Client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
			require.NoError(t, err)
			p.Status.Phase = corev1.PodSucceeded
			_, err = c.Client.CoreV1().Pods(ns).UpdateStatus(ctx, p, metav1.UpdateOptions{})
			require.NoError(t, err)
		}
		pg = phase(t, ns, "train", xv1alpha1.PodGroupFinished)
		assert.Equal(t, [3]int32{0, 3, 0}, [3]int32{pg.Status.Running, pg.Status.Succeeded, pg.Status.Failed})
	})

	t.Run("a member that fails makes the group Failed", func(t *testing.T) {
		ns := namespace(t, c)
		defer deletePodsNow(t, c, ns)
		createXPodGroup(t, x, ns, xPodGroup("mpi", 2, nil))
		createPodObjects(t, c, ns, xMembers("mpi", 2, cpuReq("1"), "")...)
		phase(t, ns, "mpi", xv1alpha1.PodGroupRunning)
		p, err := c.Client.CoreV1().Pods(ns).Get(ctx, "mpi-1", metav1.GetOptions{})
		require.NoError(t, err)
		p.Status.Phase = corev1.PodFailed
		_, err = c.Client.CoreV1().Pods(ns).UpdateStatus(ctx, p, metav1.UpdateOptions{})
		require.NoError(t, err)
		pg := phase(t, ns, "mpi", xv1alpha1.PodGroupFailed)
		assert.Equal(t, [3]int32{1, 0, 1}, [3]int32{pg.Status.Running, pg.Status.Succeeded, pg.Status.Failed})
	})

	t.Run("members with different priorities are refused with the label gangs' message", func(t *testing.T) {
		// The same two pods, once as a label gang and once in a
		// scheduler-plugins PodGroup: both define no priority of their
		// own and take their members'.
		mismatch := regexp.MustCompile(regexp.QuoteMeta(gangcore.MsgPriorityMismatch) + `: pod w-[01] has priority (0|1000), the group (0|1000)`)
		notes := map[string]string{}
		for _, dialect := range []string{"label", "x"} {
			ns := namespace(t, c)
			defer deletePodsNow(t, c, ns)
			labels := map[string]string{v1alpha1.LightweightNameLabel: "w", v1alpha1.LightweightMinAvailableLabel: "2"}
			if dialect == "x" {
				createXPodGroup(t, x, ns, xPodGroup("w", 2, nil))
				labels = inXGroup("w")
			}
			createPodObjects(t, c, ns, xPod("w-0", labels, cpuReq("1"), "x-high"), xPod("w-1", labels, cpuReq("1"), ""))
			notes[dialect] = mismatch.FindString(waitPodEvent(t, c, ns, "w-0", gangcore.MsgPriorityMismatch))
			if dialect == "x" {
				e := xGroupEvent(t, c, ns, "w", gangcore.MsgPriorityMismatch)
				assert.Equal(t, "Invalid", e.Reason)
				assert.Equal(t, e.Message, mismatch.FindString(e.Message), "the PodGroup's event is the message itself")
			}
			consistently(t, 2*time.Second, "no member bound", func() bool { return len(boundPods(t, c, ns)) == 0 })
		}
		require.NotEmpty(t, notes["label"])
		assert.Equal(t, notes["label"], notes["x"], "the same message as a label gang's")
	})

	t.Run("a pod labelled with a missing PodGroup waits with an event naming it", func(t *testing.T) {
		ns := namespace(t, c)
		defer deletePodsNow(t, c, ns)
		createPodObjects(t, c, ns, xPod("ghost-0", inXGroup("ghost"), cpuReq("1"), ""))
		note := waitPodEvent(t, c, ns, "ghost-0", "not found")
		assert.Equal(t, "PodGroup.scheduling.x-k8s.io "+ns+"/ghost not found: create it or fix the pod's scheduling.x-k8s.io/pod-group label", note)
		createXPodGroup(t, x, ns, xPodGroup("ghost", 1, nil))
		eventually(t, 60*time.Second, "bound once the group exists", func() (bool, error) { return boundWithPrefix(t, c, ns, "ghost-") == 1, nil })
		phase(t, ns, "ghost", xv1alpha1.PodGroupRunning)
	})

	t.Run("minMember 0 is said on the pod and on the PodGroup", func(t *testing.T) {
		ns := namespace(t, c)
		defer deletePodsNow(t, c, ns)
		// The CRD requires minMember >= 1 when it is set; left out it is 0.
		createXPodGroup(t, x, ns, xPodGroup("empty", 0, nil))
		createPodObjects(t, c, ns, xPod("empty-0", inXGroup("empty"), cpuReq("1"), ""))
		const why = "spec.minMember is 0: a gang needs at least 1 member"
		anyPodEvent(t, c, ns, why)
		e := xGroupEvent(t, c, ns, "empty", why)
		assert.Equal(t, corev1.EventTypeWarning, e.Type)
		assert.Equal(t, "Invalid", e.Reason)
		consistently(t, 2*time.Second, "the pod stays pending", func() bool { return len(boundPods(t, c, ns)) == 0 })
	})

	t.Run("a pod carrying the labels of two dialects is refused with an event", func(t *testing.T) {
		ns := namespace(t, c)
		defer deletePodsNow(t, c, ns)
		createPodGroup(t, c, ns, gangPG("both", 1))
		createXPodGroup(t, x, ns, xPodGroup("both", 1, nil))
		labels := inXGroup("both")
		labels[v1alpha1.PodGroupLabel] = "both"
		createPodObjects(t, c, ns, xPod("both-0", labels, cpuReq("1"), ""))
		note := waitPodEvent(t, c, ns, "both-0", "a pod belongs to one group in one API")
		assert.Equal(t, `label scheduling.phalanx.dev/pod-group="both" names a PodGroup.scheduling.phalanx.dev and label scheduling.x-k8s.io/pod-group="both" a PodGroup.scheduling.x-k8s.io: a pod belongs to one group in one API, remove one of them`, note)
		consistently(t, 2*time.Second, "the pod stays pending", func() bool { return len(boundPods(t, c, ns)) == 0 })
		// scheduler-plugins' controller counts every pod carrying its
		// label, bound or not: the group is Scheduling, not Running.
		pg := phase(t, ns, "both", xv1alpha1.PodGroupScheduling)
		assert.Zero(t, pg.Status.Running)
	})

	t.Run("scheduleTimeoutSeconds bounds the group's wait in Permit", func(t *testing.T) {
		ns := namespace(t, c)
		defer deletePodsNow(t, c, ns)
		pg := xPodGroup("slow", 3, nil)
		pg.Spec.ScheduleTimeoutSeconds = ptr.To[int32](3)
		createXPodGroup(t, x, ns, pg)
		// The third member exists but is gated: the other two reserve
		// their nodes and wait for it in Permit. The profile's own idle
		// timeout is 60 s; the group's 3 s release them.
		pods := xMembers("slow", 3, cpuReq("1"), "")
		pods[2].Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: "example.com/hold"}}
		start := time.Now()
		createPodObjects(t, c, ns, pods...)
		anyPodEvent(t, c, ns, "released after 3s in all, its PodGroup's scheduleTimeoutSeconds")
		note := anyPodEvent(t, c, ns, "the gang waited 3s in Permit (its PodGroup's scheduleTimeoutSeconds)")
		assert.Less(t, time.Since(start), 45*time.Second, "released by the group's timeout, not the profile's 60 s")
		t.Logf("released: %s", note)
		assert.Empty(t, boundPods(t, c, ns))
	})

	// The cluster: 4 nodes × 8 cpu. Fillers of 7 cpu take 28 of the 32.
	fill := func(t *testing.T, ns, class string) {
		t.Helper()
		for i := range 4 {
			createPodObjects(t, c, ns, xPod(fmt.Sprintf("filler-%d", i), nil, cpuReq("7"), class))
		}
		eventually(t, 60*time.Second, "the fillers bound", func() (bool, error) { return boundWithPrefix(t, c, ns, "filler-") == 4, nil })
	}

	t.Run("minResources: a group waits while the cluster's free room is short, says so, and binds once there is room", func(t *testing.T) {
		ns := namespace(t, c)
		defer deletePodsNow(t, c, ns)
		fill(t, ns, "")
		// Its two pods of 1 cpu each would fit; its minResources of 8 cpu
		// does not, so it is not tried.
		createXPodGroup(t, x, ns, xPodGroup("gated", 2, cpuReq("8")))
		createPodObjects(t, c, ns, xMembers("gated", 2, cpuReq("1"), "")...)
		why := "waiting for free capacity: minResources of PodGroup.scheduling.x-k8s.io " + ns + "/gated asks for 8 cpu, 2 pods in total; the cluster has 4 cpu free (short 4 cpu)"
		assert.Contains(t, anyPodEvent(t, c, ns, "waiting for free capacity"), why)
		e := xGroupEvent(t, c, ns, "gated", "waiting for free capacity")
		assert.Equal(t, why, e.Message)
		assert.Equal(t, corev1.EventTypeWarning, e.Type)
		consistently(t, 2*time.Second, "the group waits", func() bool { return boundWithPrefix(t, c, ns, "gated-") == 0 })

		require.NoError(t, c.Client.CoreV1().Pods(ns).Delete(ctx, "filler-0", metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}))
		eventually(t, 60*time.Second, "both bound once 11 cpu are free", func() (bool, error) { return boundWithPrefix(t, c, ns, "gated-") == 2, nil })
	})

	t.Run("minResources beyond every node's allocatable is reported as never", func(t *testing.T) {
		ns := namespace(t, c)
		defer deletePodsNow(t, c, ns)
		createXPodGroup(t, x, ns, xPodGroup("huge", 2, cpuReq("100")))
		createPodObjects(t, c, ns, xMembers("huge", 2, cpuReq("1"), "")...)
		why := "minResources of PodGroup.scheduling.x-k8s.io " + ns + "/huge can never be met: it asks for 100 cpu, 2 pods in total, and the allocatable of all 4 nodes together is 32 cpu; lower spec.minResources or add nodes"
		assert.Contains(t, anyPodEvent(t, c, ns, "can never be met"), why)
		assert.Equal(t, why, xGroupEvent(t, c, ns, "huge", "can never be met").Message)
		assert.Empty(t, boundPods(t, c, ns))
	})

	t.Run("minResources: pods of lower priority count as room when the group may preempt", func(t *testing.T) {
		ns := namespace(t, c)
		defer deletePodsNow(t, c, ns)
		fill(t, ns, "x-low")
		// scheduler-plugins would refuse this group forever (4 cpu free of
		// its 8); the fillers are preemptible, so Phalanx plans it and its
		// group preemption makes room.
		createXPodGroup(t, x, ns, xPodGroup("urgent", 2, cpuReq("8")))
		createPodObjects(t, c, ns, xMembers("urgent", 2, cpuReq("4"), "x-high")...)
		eventually(t, 90*time.Second, "both bound after preempting fillers", func() (bool, error) { return boundWithPrefix(t, c, ns, "urgent-") == 2, nil })
		assert.Less(t, boundWithPrefix(t, c, ns, "filler-"), 4, "fillers were preempted")
	})

	t.Run("the shipped RBAC lets the scheduler watch and the controller keep their status", func(t *testing.T) {
		applyRBAC(t, c, "manifests/overlays/second-scheduler")
		ns := namespace(t, c)
		createXPodGroup(t, x, ns, xPodGroup("rbac", 1, nil))
		saClient := func(sa string) xversioned.Interface {
			cfg, _ := serviceAccountConfig(t, c, systemNamespace, sa)
			cfg = restclient.CopyConfig(cfg)
			cfg.ContentType, cfg.AcceptContentTypes = "application/json", "application/json"
			client, err := xversioned.NewForConfig(cfg)
			require.NoError(t, err)
			return client
		}
		sched, ctrl := saClient(schedulerSA), saClient(controllerSA)
		for who, client := range map[string]xversioned.Interface{schedulerSA: sched, controllerSA: ctrl} {
			_, err := client.SchedulingV1alpha1().PodGroups("").List(ctx, metav1.ListOptions{})
			assert.NoError(t, err, "%s lists scheduling.x-k8s.io PodGroups", who)
			w, err := client.SchedulingV1alpha1().PodGroups("").Watch(ctx, metav1.ListOptions{})
			if assert.NoError(t, err, "%s watches them", who) {
				w.Stop()
			}
		}
		_, err := ctrl.SchedulingV1alpha1().PodGroups(ns).Patch(ctx, "rbac", types.MergePatchType,
			[]byte(`{"status":{"phase":"Pending"}}`), metav1.PatchOptions{}, "status")
		assert.NoError(t, err, "the controller patches their status")
		_, err = sched.SchedulingV1alpha1().PodGroups(ns).Patch(ctx, "rbac", types.MergePatchType,
			[]byte(`{"status":{"phase":"Running"}}`), metav1.PatchOptions{}, "status")
		assert.Error(t, err, "the scheduler does not write them")
	})
}
