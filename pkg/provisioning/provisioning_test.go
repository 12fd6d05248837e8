package provisioning

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
	"github.com/phalanx-sched/phalanx/pkg/provisioning/autoscalingv1"
)

func member(name, cpu string, labels map[string]string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels, Annotations: map[string]string{"a": name}},
		Spec: corev1.PodSpec{
			SchedulerName: "phalanx-scheduler",
			NodeName:      "",
			Containers: []corev1.Container{{
				Name: "main", Image: "img",
				Env:       []corev1.EnvVar{{Name: "RANK", Value: name}},
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}},
				Ports:     []corev1.ContainerPort{{ContainerPort: 80}, {ContainerPort: 9000, HostPort: 9000}},
			}},
			Volumes:         []corev1.Volume{{Name: "scratch"}},
			SchedulingGates: []corev1.PodSchedulingGate{{Name: "g"}},
		},
	}
}

func TestPodSetsCountsEachShapeOnce(t *testing.T) {
	pods := []*corev1.Pod{
		member("w-2", "4", map[string]string{"app": "w", "index": "2"}),
		member("ps-0", "1", map[string]string{"app": "ps"}),
		member("w-0", "4", map[string]string{"app": "w", "index": "0"}),
		member("w-1", "4", map[string]string{"app": "w", "index": "1"}),
	}
	sets := PodSets(pods)
	require.Len(t, sets, 2, "per-pod env, names and index labels do not split a shape")
	assert.Equal(t, int32(1), sets[0].Count, "shapes in the order of their first pod by name: ps-0 first")
	assert.Equal(t, "1", sets[0].Template.Spec.Containers[0].Resources.Requests.Cpu().String())
	assert.Equal(t, int32(3), sets[1].Count)
	assert.Equal(t, map[string]string{"app": "w"}, sets[1].Template.Labels, "only labels every pod of the shape shares")

	again := PodSets([]*corev1.Pod{pods[3], pods[2], pods[1], pods[0]})
	assert.Equal(t, sets, again, "the same pods give the same sets in any order")
}

func TestTemplateOfKeepsWhatDecidesFit(t *testing.T) {
	p := member("w-0", "4", nil)
	p.Spec.NodeSelector = map[string]string{"pool": "gpu"}
	p.Spec.Tolerations = []corev1.Toleration{{Key: "gpu", Operator: corev1.TolerationOpExists}}
	p.Spec.PriorityClassName = "high"
	tmpl := TemplateOf(p)
	s := tmpl.Spec
	assert.Equal(t, p.Spec.NodeSelector, s.NodeSelector)
	assert.Equal(t, p.Spec.Tolerations, s.Tolerations)
	assert.Equal(t, "high", s.PriorityClassName)
	require.Len(t, s.Containers, 1)
	assert.Equal(t, []corev1.ContainerPort{{ContainerPort: 9000, HostPort: 9000}}, s.Containers[0].Ports, "only host ports limit where a pod fits")
	assert.Empty(t, s.Containers[0].Env)
	assert.Empty(t, s.Volumes)
	assert.Empty(t, s.SchedulingGates, "a gated template pod would never be imagined scheduled")
	assert.Empty(t, tmpl.Annotations)

	s.NodeSelector["pool"] = "changed"
	assert.Equal(t, "gpu", p.Spec.NodeSelector["pool"], "the template is a copy")
}

func TestBackoffDoublesUpToMax(t *testing.T) {
	b := Backoff{Initial: time.Minute, Max: 5 * time.Minute}
	var got []time.Duration
	for a := 1; a <= 5; a++ {
		got = append(got, b.After(a))
	}
	assert.Equal(t, []time.Duration{time.Minute, 2 * time.Minute, 4 * time.Minute, 5 * time.Minute, 5 * time.Minute}, got)
	assert.Equal(t, 30*time.Minute, DefaultBackoff.After(100), "no overflow on many attempts")
}

func TestPhaseOfReadsTheAutoscalersConditions(t *testing.T) {
	c := func(typ string, s metav1.ConditionStatus) metav1.Condition {
		return metav1.Condition{Type: typ, Status: s, Reason: "R"}
	}
	for _, tc := range []struct {
		name  string
		conds []metav1.Condition
		want  Phase
	}{
		{"new", nil, Waiting},
		{"accepted", []metav1.Condition{c(autoscalingv1.Accepted, metav1.ConditionTrue)}, Waiting},
		{"still looking", []metav1.Condition{c(autoscalingv1.Provisioned, metav1.ConditionFalse)}, Waiting},
		{"provisioned", []metav1.Condition{c(autoscalingv1.Provisioned, metav1.ConditionTrue)}, Done},
		{"failed", []metav1.Condition{c(autoscalingv1.Provisioned, metav1.ConditionFalse), c(autoscalingv1.Failed, metav1.ConditionTrue)}, Failed},
		{"booking expired", []metav1.Condition{c(autoscalingv1.Provisioned, metav1.ConditionTrue), c(autoscalingv1.BookingExpired, metav1.ConditionTrue)}, Lapsed},
		{"revoked", []metav1.Condition{c(autoscalingv1.Provisioned, metav1.ConditionTrue), c(autoscalingv1.CapacityRevoked, metav1.ConditionTrue)}, Lapsed},
	} {
		got, _ := PhaseOf(tc.conds)
		assert.Equal(t, tc.want, got, tc.name)
	}
}

func TestShortOnlyForGangsShortOfCapacity(t *testing.T) {
	now := time.Now()
	since := metav1.NewTime(now.Add(-time.Minute))
	unsched := &metav1.Condition{Type: v1alpha1.PodGroupSchedulable, Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonUnschedulable, LastTransitionTime: since}
	pending := []*corev1.Pod{member("w-0", "1", nil)}
	nominated := member("w-1", "1", nil)
	nominated.Status.NominatedNodeName = "n1"
	with := func(reason string) *metav1.Condition { c := *unsched; c.Reason = reason; return &c }

	for _, tc := range []struct {
		name string
		g    Gang
		want bool
	}{
		{"short of capacity", Gang{Schedulable: unsched, MinCount: 2, Pending: pending}, true},
		{"not judged yet", Gang{MinCount: 2, Pending: pending}, false},
		{"invalid", Gang{Schedulable: with(v1alpha1.ReasonInvalid), MinCount: 2, Pending: pending}, false},
		{"waiting for members", Gang{Schedulable: with(v1alpha1.ReasonWaitingForPods), MinCount: 2, Pending: pending}, false},
		{"minimum placed", Gang{Schedulable: unsched, MinCount: 2, Placed: 2, Pending: pending}, false},
		{"preemption makes room", Gang{Schedulable: unsched, MinCount: 2, Pending: append(pending, nominated)}, false},
	} {
		ok, _, why := Short(tc.g, now, 10*time.Second)
		assert.Equal(t, tc.want, ok, "%s: %s", tc.name, why)
	}

	fresh := *unsched
	fresh.LastTransitionTime = metav1.NewTime(now.Add(-3 * time.Second))
	ok, wait, _ := Short(Gang{Schedulable: &fresh, MinCount: 2, Pending: pending}, now, 10*time.Second)
	assert.False(t, ok)
	assert.Equal(t, 7*time.Second, wait.Round(time.Second), "asks once the gang has been short for the delay")
}

func TestNamesStayValid(t *testing.T) {
	long := strings.Repeat("g", 250)
	a, b := RequestName(long, 1), RequestName(long, 2)
	assert.LessOrEqual(t, len(a), 253)
	assert.NotEqual(t, a, b)
	assert.LessOrEqual(t, len(TemplateName(a, 31)), 253)
	assert.Equal(t, "trainer-provreq-3", RequestName("trainer", 3))
	assert.Equal(t, 3, Attempt(&metav1.ObjectMeta{Annotations: map[string]string{AttemptAnnotation: "3"}}))
	assert.Equal(t, 0, Attempt(&metav1.ObjectMeta{}))
}
