package groups

import (
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	xv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"
)

// An update is passed on only when the definition moved: a status write
// (the same spec) is not a change, a new minimum or annotation is.
func TestSameSpec(t *testing.T) {
	base := &xv1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Name: "g", CreationTimestamp: metav1.Now()},
		Spec: xv1alpha1.PodGroupSpec{MinMember: 2, MinResources: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1000m")}}}
	status := base.DeepCopy()
	status.Status.Phase = xv1alpha1.PodGroupRunning
	status.Spec.MinResources = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}
	assert.True(t, SameSpec(SpecOfXPodGroup(base), SpecOfXPodGroup(status)), "1000m and 1 cpu are one quantity; status is not spec")
	bigger := base.DeepCopy()
	bigger.Spec.MinMember = 3
	assert.False(t, SameSpec(SpecOfXPodGroup(base), SpecOfXPodGroup(bigger)))
	annotated := base.DeepCopy()
	annotated.Annotations = map[string]string{XTopologyKeyAnnotation: "rack"}
	assert.False(t, SameSpec(SpecOfXPodGroup(base), SpecOfXPodGroup(annotated)))
}
