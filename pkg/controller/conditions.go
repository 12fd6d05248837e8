package controller

import (
	"context"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"

	"github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
	"github.com/phalanx-sched/phalanx/pkg/generated/clientset/versioned"
)

// setWorkloadCondition makes cond the Workload's condition of its type and
// reports whether that changed anything. Two writers share Workload status
// (the Workload controller and the Job integration), each with its own
// condition type, so this is a read-modify-write of the status subresource
// that retries conflicts on a fresh copy rather than a patch that would
// replace the whole list. Nothing is written when the condition already
// says the same, which keeps reconciles triggered by our own writes cheap.
func setWorkloadCondition(ctx context.Context, client versioned.Interface, cached *v1alpha1.Workload, cond metav1.Condition) (bool, error) {
	api := client.SchedulingV1alpha1().Workloads(cached.Namespace)
	changed := false
	current := cached
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if current == nil {
			fresh, err := api.Get(ctx, cached.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if fresh.UID != cached.UID {
				// Deleted and re-created meanwhile: the new object gets its
				// own reconcile.
				return nil
			}
			current = fresh
		}
		w := current.DeepCopy()
		current = nil
		c := cond
		c.ObservedGeneration = w.Generation
		if !meta.SetStatusCondition(&w.Status.Conditions, c) {
			return nil
		}
		if _, err := api.UpdateStatus(ctx, w, metav1.UpdateOptions{FieldManager: v1alpha1.ControllerName}); err != nil {
			return err
		}
		changed = true
		return nil
	})
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	return changed, err
}
