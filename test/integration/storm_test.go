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

	"github.com/phalanx-sched/phalanx/tools/sandbox"
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
	// 1,000 one-cpu pods on 400 cpu: more than the cluster could ever hold,
	// and the group condition gives the numbers.
	cond := waitGroupCondition(t, c, ns, "big", "Schedulable", "needs 1000 pods of 1 cpu; the cluster's allocatable holds at most 400 (100 nodes)")
	t.Logf("condition: %s", cond.Message)
	// Let the first round of attempts finish, then measure a quiet window.
	before := scheduleAttempts(t)
	eventually(t, 3*time.Minute, "the first round of attempts to settle", func() (bool, error) {
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

// gathered returns a metric of the in-process registry: a histogram's
// sample count, or a gauge's value.
func gathered(t *testing.T, name string) float64 {
	families, err := legacyregistry.DefaultGatherer.Gather()
	require.NoError(t, err)
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		total := 0.0
		for _, m := range f.GetMetric() {
			if h := m.GetHistogram(); h != nil {
				total += float64(h.GetSampleCount())
			} else if g := m.GetGauge(); g != nil {
				total += g.GetValue()
			}
		}
		return total
	}
	return 0
}

// TestBindsArePaced: with the shipped profile (PhalanxGang before
// DefaultBinder at bind), every bind of a gang takes a pacing slot, and
// every slot is given back once the pods are bound.
func TestBindsArePaced(t *testing.T) {
	c := startCluster(t, sandbox.Options{Scheduler: true})
	addNodes(t, c, "n", 4, "8", 0)
	ns := namespace(t, c)
	before := gathered(t, "phalanx_bind_slot_wait_seconds")
	const size = 24
	createPodGroup(t, c, ns, gangPG("paced", size))
	var ms []member
	for i := 0; i < size; i++ {
		ms = append(ms, member{name: fmt.Sprintf("paced-%02d", i), labels: inGroup("paced"), cpu: "1"})
	}
	createPods(t, c, ns, ms...)
	waitBound(t, c, ns, "paced-", size)
	assert.GreaterOrEqual(t, gathered(t, "phalanx_bind_slot_wait_seconds")-before, float64(size), "each bind went through PhalanxGang's Bind")
	eventually(t, 10*time.Second, "every slot given back", func() (bool, error) {
		return gathered(t, "phalanx_binds_in_flight") == 0, nil
	})
}
