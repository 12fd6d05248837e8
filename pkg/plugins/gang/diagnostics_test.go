package gang

import (
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/phalanx-sched/phalanx/pkg/groups"
	"github.com/phalanx-sched/phalanx/pkg/placement"
)

func member(name string, prio int32, scheduler string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.PodSpec{Priority: &prio, SchedulerName: scheduler,
		Containers: []corev1.Container{{Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")}}}}}}
}

func TestDisagreementIsPreFiltersCheck(t *testing.T) {
	ten := int32(10)
	group := groups.Info{Priority: &ten}
	assert.Empty(t, Disagreement(member("a", 10, "s"), []*corev1.Pod{member("a", 10, "s"), member("b", 10, "s")}, group, nil))
	assert.Equal(t, MsgPriorityMismatch+": pod b has priority 0, the group 10",
		Disagreement(member("a", 10, "s"), []*corev1.Pod{member("b", 0, "s")}, group, nil))
	assert.Equal(t, MsgSchedulerNameMismatch+`: pod b uses "t", pod a uses "s"`,
		Disagreement(member("a", 10, "s"), []*corev1.Pod{member("b", 10, "t")}, group, nil))
	// A label gang's priority is its members'.
	assert.Empty(t, Disagreement(member("a", 3, "s"), []*corev1.Pod{member("b", 3, "s")}, groups.Info{PriorityFromMembers: true}, nil))
	assert.Contains(t, Disagreement(member("a", 3, "s"), []*corev1.Pod{member("b", 4, "s")}, groups.Info{PriorityFromMembers: true}, nil), "pod b has priority 4, the group 3")
}

func TestExceedsAllocatableIsPreFiltersSizeCheck(t *testing.T) {
	alloc := []placement.Resources{{corev1.ResourceCPU: 4000}, {corev1.ResourceCPU: 4000}}
	pods := []*corev1.Pod{member("a", 0, "s")}
	assert.Empty(t, ExceedsAllocatable(4, pods, alloc))
	assert.Equal(t, "needs 5 pods of 2 cpu; the cluster's allocatable holds at most 4 (2 nodes)", ExceedsAllocatable(5, pods, alloc))
}
