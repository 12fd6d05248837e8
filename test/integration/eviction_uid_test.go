package integration

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/phalanx-sched/phalanx/tools/sandbox"
)

// TestAPIServerKeepsAVictimsRequestsOffItsSuccessor pins the API server
// behaviour that eviction by UID (pkg/plugins/preemption/victim.go) relies
// on, and that the preemption unit tests' fake client mirrors: once a pod
// is recreated under the same name, a status patch naming the old UID is
// refused as Invalid on metadata.uid, and a delete with the old UID as
// precondition is refused as Conflict; the new pod is untouched. With the
// current UID both go through.
func TestAPIServerKeepsAVictimsRequestsOffItsSuccessor(t *testing.T) {
	c := startCluster(t, sandbox.Options{})
	ctx := context.Background()
	ns := namespace(t, c)
	pods := c.Client.CoreV1().Pods(ns)
	create := func() *corev1.Pod {
		p, err := pods.Create(ctx, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "web-0"},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "pause"}}},
		}, metav1.CreateOptions{})
		require.NoError(t, err)
		return p
	}
	mark := func(uid types.UID) error {
		patch := fmt.Sprintf(`{"metadata":{"uid":%q},"status":{"conditions":[{"type":"DisruptionTarget","status":"True","reason":"PreemptionByScheduler"}]}}`, uid)
		_, err := pods.Patch(ctx, "web-0", types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}, "status")
		return err
	}
	remove := func(uid types.UID) error {
		return pods.Delete(ctx, "web-0", metav1.DeleteOptions{GracePeriodSeconds: new(int64), Preconditions: &metav1.Preconditions{UID: &uid}})
	}

	old := create()
	require.NoError(t, pods.Delete(ctx, "web-0", metav1.DeleteOptions{GracePeriodSeconds: new(int64)}))
	eventually(t, 30*time.Second, "the old pod gone", func() (bool, error) {
		_, err := pods.Get(ctx, "web-0", metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	successor := create()

	t.Run("a status patch naming the old UID is refused as Invalid on metadata.uid", func(t *testing.T) {
		err := mark(old.UID)
		require.True(t, apierrors.IsInvalid(err), "%v", err)
		var causes []string
		for _, cause := range err.(apierrors.APIStatus).Status().Details.Causes {
			causes = append(causes, cause.Field)
		}
		assert.Contains(t, causes, "metadata.uid")
	})
	t.Run("a delete with the old UID as precondition is refused as Conflict", func(t *testing.T) {
		err := remove(old.UID)
		assert.True(t, apierrors.IsConflict(err), "%v", err)
	})
	t.Run("the successor is untouched", func(t *testing.T) {
		p, err := pods.Get(ctx, "web-0", metav1.GetOptions{})
		require.NoError(t, err)
		assert.Equal(t, successor.UID, p.UID)
		assert.Empty(t, p.Status.Conditions)
	})
	t.Run("with the current UID both go through", func(t *testing.T) {
		require.NoError(t, mark(successor.UID))
		require.NoError(t, remove(successor.UID))
	})
}
