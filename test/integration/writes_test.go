package integration

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
	"github.com/phalanx-sched/phalanx/tools/sandbox"
)

// TestGangMembersBindWithoutScheduledEvents: a gang with a PodGroup binds
// with one API write per member, its binding; the group's condition says it
// is scheduled. Plain pods and label gangs, which have no group object to
// look at, keep the framework's Scheduled event.
func TestGangMembersBindWithoutScheduledEvents(t *testing.T) {
	c := startCluster(t, sandbox.Options{
		Topology:  &sandbox.Topology{Zones: 1, RacksPerZone: 1, NodesPerRack: 4, CPU: "4", Memory: "16Gi", Pods: 110},
		Scheduler: true,
	})
	ctx := context.Background()
	ns := namespace(t, c)
	createPodGroup(t, c, ns, gangPG("trainer", 3))
	label := map[string]string{v1alpha1.LightweightNameLabel: "tf", v1alpha1.LightweightMinAvailableLabel: "2"}
	createPods(t, c, ns,
		member{name: "trainer-0", labels: inGroup("trainer"), cpu: "1"},
		member{name: "trainer-1", labels: inGroup("trainer"), cpu: "1"},
		member{name: "trainer-2", labels: inGroup("trainer"), cpu: "1"},
		member{name: "tf-0", labels: label, cpu: "1"},
		member{name: "tf-1", labels: label, cpu: "1"},
	)
	_, err := c.Client.CoreV1().Pods(ns).Create(ctx, plainPod("plain", "1"), metav1.CreateOptions{})
	assert.NoError(t, err)
	eventually(t, 30*time.Second, "6 pods bound", func() (bool, error) { return len(boundPods(t, c, ns)) == 6, nil })
	waitGroupCondition(t, c, ns, "trainer", v1alpha1.PodGroupSchedulable, "3 pods bound")

	scheduled := func() map[string]bool {
		evs, err := c.Client.EventsV1().Events(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]bool{}
		for _, e := range evs.Items {
			if e.Reason == "Scheduled" {
				got[e.Regarding.Name] = true
			}
		}
		return got
	}
	eventually(t, 30*time.Second, "Scheduled events of the pods outside PodGroups", func() (bool, error) {
		return len(scheduled()) >= 3, nil
	})
	// The recorder sends in order; give a late member event time to show.
	time.Sleep(2 * time.Second)
	got := scheduled()
	for name := range got {
		assert.False(t, strings.HasPrefix(name, "trainer-"), "no Scheduled event for %s: the PodGroup's condition reports the gang", name)
	}
	assert.Equal(t, map[string]bool{"tf-0": true, "tf-1": true, "plain": true}, got)
}
