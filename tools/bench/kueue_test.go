package bench

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/phalanx-sched/phalanx/tools/sandbox"
)

// Each variant of the preferred stream asks Kueue for the nearest request
// Kueue has: the preferred rack alone (Kueue takes one request per pod
// set), the required block, the required rack, and no constraint.
func TestKueueJobsAskForTheCasesTopology(t *testing.T) {
	for _, v := range []struct {
		suffix, key, value string
	}{
		{"_PreferredRack_RequiredBlock", "kueue.x-k8s.io/podset-preferred-topology", sandbox.RackLabel},
		{"_RequiredBlock", "kueue.x-k8s.io/podset-required-topology", sandbox.BlockLabel},
		{"_RequiredRack", "kueue.x-k8s.io/podset-required-topology", sandbox.RackLabel},
		{"_Unconstrained", "kueue.x-k8s.io/podset-unconstrained-topology", "true"},
	} {
		c := findCase(t, Cases(true), v.suffix)
		assert.Empty(t, kueueTASUnsupported(c), c.Name)
		assert.Equal(t, []string{sandbox.ZoneLabel, sandbox.BlockLabel, sandbox.RackLabel, sandbox.HostnameLabel}, kueueTopologyLevels(c),
			"the Topology mirrors the case's node labels, hostname last")

		gang := c.measuredGangs()[1]
		job := kueueJob(c, gang)
		assert.Equal(t, map[string]string{v.key: v.value}, job.Spec.Template.Annotations, c.Name)
		assert.Equal(t, gang.name, job.Name)
		assert.Equal(t, "bench", job.Labels["kueue.x-k8s.io/queue-name"])
		assert.Equal(t, kueuePriorityClass(gang.name), job.Labels["kueue.x-k8s.io/priority-class"])
		require.NotNil(t, job.Spec.Parallelism)
		assert.Equal(t, int32(gang.size), *job.Spec.Parallelism)
		assert.Equal(t, int32(gang.size), *job.Spec.Completions)
		assert.Equal(t, batchv1.IndexedCompletion, *job.Spec.CompletionMode, "member i is the pod of index i")
		assert.True(t, *job.Spec.Suspend)
		spec := job.Spec.Template.Spec
		assert.Equal(t, corev1.DefaultSchedulerName, spec.SchedulerName, "upstream kube-scheduler binds")
		assert.Nil(t, spec.SchedulingGroup, "no gang for the scheduler: Kueue admits the Job whole")
		require.Len(t, spec.Containers, 1)
		assert.Equal(t, c.podRequests(), spec.Containers[0].Resources.Requests, "the case's pod")
	}
}

// A Job's pods are the case's members <gang>-<index>, whatever the Job
// controller named them; other pods keep their names.
func TestKueueMemberNames(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "gang-3-2-x7k2q", Labels: map[string]string{
		batchv1.JobNameLabel: "gang-3", batchv1.JobCompletionIndexAnnotation: "2",
	}}}
	assert.Equal(t, "gang-3-2", memberName(ArmKueueTAS)(pod))
	assert.Equal(t, "gang-3-2-x7k2q", memberName(ArmUpstream)(pod))
	assert.Equal(t, "pod-0", memberName(ArmKueueTAS)(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "pod-0"}}))
}

// The arm runs the preferred stream only; on any other case it is skipped
// before anything starts.
func TestKueueArmSkipsOtherCases(t *testing.T) {
	h := &Harness{opts: Options{Logf: func(string, ...interface{}) {}}}
	ran := 0
	for _, quick := range []bool{true, false} {
		for _, c := range Cases(quick) {
			if c.preferredStream() {
				ran++
				continue
			}
			res := h.RunCase(context.Background(), c, ArmKueueTAS, 1)
			assert.Contains(t, res.Skipped, "preferred-topology stream only", c.Name)
		}
	}
	assert.Equal(t, 8, ran, "four variants, quick and full")
}

// Kueue's CPU is read from /proc/<pid>/stat: on this process it agrees
// with getrusage to within a few ticks.
func TestProcessCPUOfAgreesWithRusage(t *testing.T) {
	deadline := time.Now().Add(100 * time.Millisecond)
	for n := 0; time.Now().Before(deadline); n++ {
		_ = n * n
	}
	fromProc, fromRusage := processCPUOf(os.Getpid()), processCPU()
	assert.Positive(t, fromProc)
	assert.InDelta(t, fromRusage.Seconds(), fromProc.Seconds(), 0.05)
	assert.Zero(t, processCPUOf(-1), "no such process")
}
