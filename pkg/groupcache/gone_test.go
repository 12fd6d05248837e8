package groupcache

import (
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	v1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
	"github.com/phalanx-sched/phalanx/pkg/groups"
)

// TestGoneNotifications: subscribers hear that a group is gone when its
// object is deleted or a label group's last member leaves (deleted, or
// relabelled), and not while it lives.
func TestGoneNotifications(t *testing.T) {
	f := NewFed()
	var gone []groups.Key
	f.SubscribeGone(func(k groups.Key) { gone = append(gone, k) })
	pod := func(name string, labels map[string]string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID(name), Labels: labels}}
	}
	pair := map[string]string{v1alpha1.LightweightNameLabel: "tf", v1alpha1.LightweightMinAvailableLabel: "2"}
	tf := groups.Key{Kind: groups.LabelKind, Namespace: "ns", Name: "tf"}
	f.OnPod(pod("tf-0", pair))
	f.OnPod(pod("tf-1", pair))
	f.OnPodDeleted(pod("tf-0", pair))
	assert.Empty(t, gone, "a label group with a member left lives")
	f.OnPod(pod("tf-1", map[string]string{"app": "other"}))
	assert.Equal(t, []groups.Key{tf}, gone, "its last member relabelled away")

	gone = nil
	pg := &v1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "trainer"}}
	trainer := groups.Key{Kind: groups.PodGroupKind, Namespace: "ns", Name: "trainer"}
	f.OnPodGroup(pg)
	member := pod("trainer-0", map[string]string{v1alpha1.PodGroupLabel: "trainer"})
	f.OnPod(member)
	f.OnPodDeleted(member)
	assert.Empty(t, gone, "a PodGroup without members lives while its object does")
	f.OnPod(member)
	f.OnGroupDeleted(pg, groups.PodGroupKind)
	assert.Equal(t, []groups.Key{trainer}, gone, "a deleted PodGroup is gone, members or not")
}
