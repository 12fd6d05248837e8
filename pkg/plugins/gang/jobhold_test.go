package gang

import (
	"testing"

	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/phalanx-sched/phalanx/pkg/controller"
)

func TestJobHoldReason(t *testing.T) {
	owner := &metav1.OwnerReference{APIVersion: "batch/v1", Kind: "Job", Name: "train", UID: "uid-1"}
	job := func(uid types.UID, ann map[string]string) metav1.Object {
		return &metav1.ObjectMeta{Name: "train", UID: uid, Annotations: ann}
	}
	tests := []struct {
		name string
		job  metav1.Object
		want string
	}{
		{name: "a gang Job's pod waits for the controller", job: job("uid-1", map[string]string{controller.GangAnnotation: "true"}),
			want: "waiting for phalanx-controller to attach the pod to PodGroup train-workers of gang Job train"},
		{name: "a Job the scheduler has not seen yet holds its pod", job: nil,
			want: "waiting for the scheduler to see Job train, to know whether it is a gang"},
		{name: "a Job without the annotation does not", job: job("uid-1", nil)},
		{name: "a Job that opted out does not", job: job("uid-1", map[string]string{controller.GangAnnotation: "false"})},
		{name: "a pod of an earlier Job of the same name does not", job: job("uid-2", map[string]string{controller.GangAnnotation: "true"})},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, jobHoldReason(owner, tc.job))
		})
	}
}
