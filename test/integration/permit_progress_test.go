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
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/phalanx-sched/phalanx/config"
	"github.com/phalanx-sched/phalanx/tools/sandbox"
)

// TestSlowGangOutlastsPermitTimeout: the Permit timeout is 3 s, but the
// gang's members reach Permit over about 8 s (the last six are released
// from a scheduling gate one a second, as a gang far larger than the
// scheduler's rate would arrive). The first members wait well beyond 3 s,
// yet none is released while the gang keeps arriving: all 8 bind, and no
// member ever failed to schedule. With a per-pod timeout the first members
// would be released at 3 s, and the gang would churn until its last member
// arrived.
func TestSlowGangOutlastsPermitTimeout(t *testing.T) {
	cfg := strings.Replace(string(config.SecondScheduler), "permitWaitingTimeSeconds: 60", "permitWaitingTimeSeconds: 3", 1)
	require.Contains(t, cfg, "permitWaitingTimeSeconds: 3\n")
	c := startCluster(t, sandbox.Options{Scheduler: true, SchedulerConfig: []byte(cfg)})
	ctx := context.Background()
	addNodes(t, c, "n", 8, "4", 0)
	ns := namespace(t, c)
	createPodGroup(t, c, ns, gangPG("slow", 8))
	const gated = 6
	for i := 0; i < 8; i++ {
		createPods(t, c, ns, member{name: fmt.Sprintf("slow-%d", i), labels: inGroup("slow"), cpu: "4", gated: i >= 8-gated})
	}
	eventually(t, 30*time.Second, "the first members waiting in Permit", func() (bool, error) {
		evs, err := c.Client.EventsV1().Events(ns).List(ctx, metav1.ListOptions{})
		return err == nil && hasReason(evs.Items, "WaitingForGang"), err
	})
	start := time.Now()
	// Pacing, not synchronisation: each release is one more member
	// arriving in Permit, well within the 3 s idle timeout of the last.
	for i := 8 - gated; i < 8; i++ {
		time.Sleep(time.Second)
		_, err := c.Client.CoreV1().Pods(ns).Patch(ctx, fmt.Sprintf("slow-%d", i), types.JSONPatchType,
			[]byte(`[{"op":"remove","path":"/spec/schedulingGates"}]`), metav1.PatchOptions{})
		require.NoError(t, err)
	}
	eventually(t, 60*time.Second, "the whole gang bound", func() (bool, error) {
		return boundWithPrefix(t, c, ns, "slow-") == 8, nil
	})
	waited := time.Since(start)
	assert.Greater(t, waited, 3*time.Second, "the first members waited longer than the Permit timeout")
	t.Logf("the first members waited at least %v in Permit", waited.Round(100*time.Millisecond))

	evs, err := c.Client.EventsV1().Events(ns).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	for _, e := range evs.Items {
		assert.NotEqual(t, "FailedScheduling", e.Reason, "member %s was released while the gang progressed: %s", e.Regarding.Name, e.Note)
	}
}

// TestGangLargerThanClusterFailsFast: a gang of 8 four-cpu pods on 4
// four-cpu nodes could not fit even an empty cluster. It is told so, with
// the numbers, and none of its pods binds; 4 more nodes make it fit, and
// it binds whole without anything else happening.
func TestGangLargerThanClusterFailsFast(t *testing.T) {
	c := startCluster(t, sandbox.Options{Scheduler: true})
	addNodes(t, c, "n", 4, "4", 0)
	ns := namespace(t, c)
	createPodGroup(t, c, ns, gangPG("huge", 8))
	for i := 0; i < 8; i++ {
		createPods(t, c, ns, member{name: fmt.Sprintf("huge-%d", i), labels: inGroup("huge"), cpu: "4"})
	}
	waitGroupCondition(t, c, ns, "huge", "Schedulable", "needs 8 pods of 4 cpu; the cluster's allocatable holds at most 4 (4 nodes)")
	assert.Zero(t, boundWithPrefix(t, c, ns, "huge-"))

	// Under a gang composite, the composite says so too: it cannot be
	// placed without the child.
	ns2 := namespace(t, c)
	pg := gangPG("wide", 8)
	pg.Spec.ParentCompositePodGroupName = ptr.To("job")
	createPodGroup(t, c, ns2, pg)
	for i := 0; i < 8; i++ {
		createPods(t, c, ns2, member{name: fmt.Sprintf("wide-%d", i), labels: inGroup("wide"), cpu: "4"})
	}
	_, err := c.Phalanx.SchedulingV1alpha1().CompositePodGroups(ns2).Create(context.Background(), composite("job", 1), metav1.CreateOptions{})
	require.NoError(t, err)
	eventually(t, 60*time.Second, "the composite's Schedulable=False naming its child", func() (bool, error) {
		cpg, err := c.Phalanx.SchedulingV1alpha1().CompositePodGroups(ns2).Get(context.Background(), "job", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		cond := meta.FindStatusCondition(cpg.Status.Conditions, "Schedulable")
		return cond != nil && cond.Status == metav1.ConditionFalse &&
			strings.Contains(cond.Message, "child wide: needs 8 pods of 4 cpu; the cluster's allocatable holds at most 4 (4 nodes)"), nil
	})

	// The composite's gang would compete with huge for the new nodes.
	forceDeletePods(t, c, ns2, "wide-")
	addNodes(t, c, "more", 4, "4", 0)
	eventually(t, 60*time.Second, "the gang bound once the cluster can hold it", func() (bool, error) {
		return boundWithPrefix(t, c, ns, "huge-") == 8, nil
	})
}
