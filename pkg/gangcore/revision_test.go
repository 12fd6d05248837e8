package gangcore

import (
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"

	"github.com/phalanx-sched/phalanx/pkg/groups"
	"github.com/phalanx-sched/phalanx/pkg/placement"
)

// TestPreFilterChecksAnswersOnlyWhatIsAsked: each answer comes from the
// same rule PreFilter used before (disagreement, waiting, size), and a
// question not asked is not answered, so a remembered verdict stands.
func TestPreFilterChecksAnswersOnlyWhatIsAsked(t *testing.T) {
	ten := int32(10)
	root := groups.Info{Priority: &ten}
	ref := member("a", 10, "s")
	stray := member("b", 0, "s")
	twoCPU := []placement.Resources{{"cpu": 2000}, {"cpu": 2000}}
	oneNode := []placement.Resources{{"cpu": 2000}}
	tests := []struct {
		name string
		in   PreFilterInput
		want PreFilterVerdict
	}{
		{name: "nothing asked, quorum met", in: PreFilterInput{Ref: ref, Root: root, Priority: 10, Quorum: true, Members: []*corev1.Pod{stray}}},
		{name: "members asked", in: PreFilterInput{Ref: ref, Root: root, Priority: 10, Quorum: true, CheckMembers: true, Members: []*corev1.Pod{ref, stray}},
			want: PreFilterVerdict{Disagreement: DisagreementAt(ref, []*corev1.Pod{ref, stray}, root, 10, "")}},
		{name: "quorum short", in: PreFilterInput{Ref: ref, Root: root, Priority: 10, Short: groups.Shortfall{Leaf: true, Have: 1, Need: 2}},
			want: PreFilterVerdict{Waiting: "waiting for pods: 1/2 present"}},
		{name: "size asked", in: PreFilterInput{Ref: ref, Root: root, Priority: 10, Quorum: true, CheckSize: true, MinCount: 2, Requests: twoCPU, Alloc: oneNode},
			want: PreFilterVerdict{TooLarge: ExceedsAllocatable(2, twoCPU, oneNode)}},
		{name: "size not asked", in: PreFilterInput{Ref: ref, Root: root, Priority: 10, Quorum: true, MinCount: 2, Requests: twoCPU, Alloc: oneNode}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, PreFilterChecks(tc.in))
		})
	}
	assert.NotEmpty(t, tests[1].want.Disagreement)
	assert.NotEmpty(t, tests[3].want.TooLarge)
}
