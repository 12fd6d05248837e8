package integration

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/component-base/metrics/legacyregistry"

	"github.com/phalanx-sched/phalanx/pkg/sandbox"
)

// scheduleAttempts reads kube-scheduler's scheduler_schedule_attempts_total
// for the phalanx-scheduler profile from the in-process registry.
func scheduleAttempts(t *testing.T) float64 {
	families, err := legacyregistry.DefaultGatherer.Gather()
	require.NoError(t, err)
	total := 0.0
	for _, f := range families {
		if f.GetName() != "scheduler_schedule_attempts_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "profile" && l.GetValue() == "phalanx-scheduler" {
					total += m.GetCounter().GetValue()
				}
			}
		}
	}
	return total
}

// TestUnschedulableGangDoesNotSpin: a 1,000-pod gang that cannot fit is
// tried, explained, and then left alone until the cluster changes: no
// requeue storm.
func TestUnschedulableGangDoesNotSpin(t *testing.T) {
	c := startCluster(t, sandbox.Options{Scheduler: true, Topology: &sandbox.Topology{
		Zones: 1, RacksPerZone: 1, NodesPerRack: 100, CPU: "4", Memory: "32Gi", Pods: 110}})
	ctx := context.Background()
	ns := namespace(t, c)
	const size = 1000
	createPodGroup(t, c, ns, gangPG("big", size))
	for i := 0; i < size; i++ {
		_, err := c.Client.CoreV1().Pods(ns).Create(ctx, member{name: fmt.Sprintf("big-%04d", i), labels: inGroup("big"), cpu: "1"}.pod(), metav1.CreateOptions{})
		require.NoError(t, err)
	}
	// 1,000 one-cpu pods on 400 cpu: the group condition gives the numbers.
	cond := waitGroupCondition(t, c, ns, "big", "Schedulable", "of 1000 pods fit")
	t.Logf("condition: %s", cond.Message)
	// Let the first round of attempts finish, then measure a quiet window.
	before := scheduleAttempts(t)
	eventually(t, 60*time.Second, "the first round of attempts to settle", func() (bool, error) {
		time.Sleep(2 * time.Second)
		now := scheduleAttempts(t)
		settled := now-before < 10
		before = now
		return settled, nil
	})
	const window = 20 * time.Second
	start := scheduleAttempts(t)
	time.Sleep(window)
	perMinute := (scheduleAttempts(t) - start) * float64(time.Minute/window)
	t.Logf("a waiting %d-pod gang costs %.0f scheduling attempts per minute", size, perMinute)
	assert.Less(t, perMinute, float64(size), "the waiting gang keeps being retried")
	assert.Empty(t, boundPods(t, c, ns))
}
