package controller

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	"github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
)

// memberPod is a pod of PodGroup pg in the given state.
func memberPod(name, pg, node string, phase corev1.PodPhase) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, UID: types.UID("uid-" + name),
			Labels: map[string]string{v1alpha1.PodGroupLabel: pg}},
		Spec:   corev1.PodSpec{NodeName: node},
		Status: corev1.PodStatus{Phase: phase},
	}
}

// scheduledGroup is a PodGroup whose scheduler-written condition must
// survive every counter write.
func scheduledGroup(members, scheduled, running int32) *v1alpha1.PodGroup {
	return &v1alpha1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Name: "trainer", Namespace: ns, UID: "uid-trainer"},
		Spec:       v1alpha1.PodGroupSpec{SchedulingPolicy: v1alpha1.PodGroupSchedulingPolicy{Gang: &v1alpha1.GangSchedulingPolicy{MinCount: 2}}},
		Status: v1alpha1.PodGroupStatus{
			Conditions: []metav1.Condition{{
				Type: v1alpha1.PodGroupInitiallyScheduled, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonScheduled,
				Message: "4/4 pods bound", LastTransitionTime: metav1.Unix(1767225600, 0),
			}},
			Members: members, Scheduled: scheduled, Running: running,
		},
	}
}

func TestPodGroupStatusCounters(t *testing.T) {
	ctx := context.Background()
	terminating := memberPod("terminating", "trainer", "node-1", corev1.PodRunning)
	terminating.DeletionTimestamp = &metav1.Time{}
	bySpec := memberPod("by-spec", "", "", corev1.PodPending)
	delete(bySpec.Labels, v1alpha1.PodGroupLabel)
	bySpec.Spec.SchedulingGroup = &corev1.PodSchedulingGroup{PodGroupName: ptr.To("trainer")}

	tests := []struct {
		name  string
		group *v1alpha1.PodGroup
		pods  []runtime.Object
		want  string // the merge patch, or "" for no write
	}{
		{
			name:  "members, scheduled and running are counted from the group's pods, not an upstream PodGroup's of the same name",
			group: scheduledGroup(0, 0, 0),
			pods: []runtime.Object{
				memberPod("running", "trainer", "node-1", corev1.PodRunning),
				memberPod("bound", "trainer", "node-2", corev1.PodPending),
				memberPod("pending", "trainer", "", corev1.PodPending),
				bySpec,
				terminating,
				memberPod("succeeded", "trainer", "node-3", corev1.PodSucceeded),
				memberPod("failed", "trainer", "node-3", corev1.PodFailed),
				memberPod("elsewhere", "other", "node-1", corev1.PodRunning),
			},
			want: `{"status":{"members":3,"scheduled":2,"running":1}}`,
		},
		{
			name:  "counters that already match are not written",
			group: scheduledGroup(1, 1, 1),
			pods:  []runtime.Object{memberPod("running", "trainer", "node-1", corev1.PodRunning)},
		},
		{
			name:  "counters fall back to zero when the pods are gone",
			group: scheduledGroup(3, 3, 3),
			want:  `{"status":{"members":0,"scheduled":0,"running":0}}`,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, append([]runtime.Object{tc.group}, tc.pods...)...)
			require.NoError(t, f.c.status.sync(ctx, key("trainer")))

			var patches []clienttesting.PatchAction
			for _, a := range f.phalanx.Actions() {
				if p, ok := a.(clienttesting.PatchAction); ok {
					patches = append(patches, p)
				}
			}
			if tc.want == "" {
				assert.Empty(t, writes(f.phalanx.Actions()))
				return
			}
			require.Len(t, patches, 1)
			assert.Equal(t, "status", patches[0].GetSubresource())
			assert.Equal(t, types.MergePatchType, patches[0].GetPatchType())
			assert.JSONEq(t, tc.want, string(patches[0].GetPatch()), "the patch names only the counters")
			assert.Equal(t, tc.group.Status.Conditions, f.podGroup("trainer").Status.Conditions,
				"the scheduler's conditions are untouched")
		})
	}

	t.Run("a group that no longer exists is not an error", func(t *testing.T) {
		f := newFixture(t, memberPod("running", "trainer", "node-1", corev1.PodRunning))
		require.NoError(t, f.c.status.sync(ctx, key("trainer")))
		assert.Empty(t, writes(f.phalanx.Actions()))
	})
}
