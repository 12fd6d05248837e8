package gangcore

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

// TestMismatch: members must share the group's priority and preemption
// policy (each other's, for groups that define none) and the member's
// scheduler.
func TestMismatch(t *testing.T) {
	never := corev1.PreemptNever
	withPolicy := func(p *corev1.Pod) *corev1.Pod { p.Spec.PreemptionPolicy = &never; return p }
	tests := []struct {
		name      string
		m         *corev1.Pod
		policyMsg string
		want      string
	}{
		{"agrees", member("b", 10, "s"), MsgPolicyMismatchWithGroup, ""},
		{"priority", member("b", 1, "s"), MsgPolicyMismatchWithGroup, MsgPriorityMismatch + ": pod b has priority 1, the group 10"},
		{"policy against the group's", withPolicy(member("b", 10, "s")), MsgPolicyMismatchWithGroup, MsgPolicyMismatchWithGroup + ": pod b has Never, the group PreemptLowerPriority"},
		{"policy among members", withPolicy(member("b", 10, "s")), MsgPolicyMismatch, MsgPolicyMismatch + ": pod b has Never, the group PreemptLowerPriority"},
		{"scheduler", member("b", 10, "t"), MsgPolicyMismatchWithGroup, MsgSchedulerNameMismatch + `: pod b uses "t", pod a uses "s"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, Mismatch(tc.m, member("a", 10, "s"), 10, corev1.PreemptLowerPriority, tc.policyMsg))
		})
	}
	assert.Equal(t, MsgPolicyMismatch, PolicyMessage(groups.Info{PriorityFromMembers: true}))
	assert.Equal(t, MsgPolicyMismatchWithGroup, PolicyMessage(groups.Info{}))
}

// TestExceedsAllocatable: a gang whose minCount the nodes' allocatable
// could not hold even empty is refused, with the numbers.
func TestExceedsAllocatable(t *testing.T) {
	cpu := func(m int64) placement.Resources { return placement.Resources{corev1.ResourceCPU: m} }
	nodes := func(n int, cpuMilli, pods int64) []placement.Resources {
		out := make([]placement.Resources, n)
		for i := range out {
			out[i] = placement.Resources{corev1.ResourceCPU: cpuMilli, corev1.ResourcePods: pods}
		}
		return out
	}
	tests := []struct {
		name     string
		need     int
		requests []placement.Resources
		alloc    []placement.Resources
		want     string
	}{
		{"fits", 8, []placement.Resources{cpu(1000)}, nodes(2, 4000, 110), ""},
		{"too many", 9, []placement.Resources{cpu(1000)}, nodes(2, 4000, 110), "needs 9 pods of 1 cpu; the cluster's allocatable holds at most 8 (2 nodes)"},
		{"pod slots bound a node", 5, []placement.Resources{cpu(100)}, nodes(2, 64000, 2), "needs 5 pods of 100m cpu; the cluster's allocatable holds at most 4 (2 nodes)"},
		{"the smallest member bounds", 5, []placement.Resources{cpu(4000), cpu(2000)}, nodes(2, 4000, 110), "needs 5 pods of at least 2 cpu; the cluster's allocatable holds at most 4 (2 nodes)"},
		{"no members yet", 5, nil, nodes(1, 1000, 1), ""},
		{"nothing requested, no pod limit", 5, []placement.Resources{{}}, []placement.Resources{cpu(1000)}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var first placement.Resources
			if len(tc.requests) > 0 {
				first = placement.Resources{}
				for k, v := range tc.requests[0] {
					first[k] = v
				}
			}
			assert.Equal(t, tc.want, ExceedsAllocatable(tc.need, tc.requests, tc.alloc))
			if first != nil {
				assert.Equal(t, first, tc.requests[0], "the caller's requests are not modified")
			}
		})
	}
	assert.Equal(t, "1500m cpu, 4Gi memory, 2 pods", Describe(placement.Resources{corev1.ResourceCPU: 1500, corev1.ResourceMemory: 4 << 30, corev1.ResourcePods: 2}))
	assert.Equal(t, "0 cpu", Amounts(placement.Resources{corev1.ResourceCPU: 0}, true))
}

func TestWaitingMessage(t *testing.T) {
	assert.Equal(t, "waiting for pods: 3/4 present", WaitingMessage(groups.Shortfall{Leaf: true, Have: 3, Need: 4}))
	assert.Equal(t, "waiting for child groups: 1/2 have their minimum pods", WaitingMessage(groups.Shortfall{Have: 1, Need: 2}))
}
