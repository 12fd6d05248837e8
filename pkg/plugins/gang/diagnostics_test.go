package gang

import (
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/phalanx-sched/phalanx/pkg/gangcore"
	"github.com/phalanx-sched/phalanx/pkg/placement"
)

func member(name string, prio int32, scheduler string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.PodSpec{Priority: &prio, SchedulerName: scheduler,
		Containers: []corev1.Container{{Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")}}}}}}
}

// TestExceedsAllocatableIsPreFiltersSizeCheck: the size check the
// diagnostics ask (gangcore.ExceedsAllocatable) reads members' requests
// as PreFilter does.
func TestExceedsAllocatableIsPreFiltersSizeCheck(t *testing.T) {
	alloc := []placement.Resources{{corev1.ResourceCPU: 4000}, {corev1.ResourceCPU: 4000}}
	pods := []*corev1.Pod{member("a", 0, "s")}
	assert.Empty(t, gangcore.ExceedsAllocatable(4, requestsOf(pods), alloc))
	assert.Equal(t, "needs 5 pods of 2 cpu; the cluster's allocatable holds at most 4 (2 nodes)", gangcore.ExceedsAllocatable(5, requestsOf(pods), alloc))
}
