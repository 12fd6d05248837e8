package planinput

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/phalanx-sched/phalanx/pkg/groups"
)

// A claim reserved for each pod takes 256 consumers: the pods that hold it
// and the group's members on their way to binding go first, then the
// pending members in order; a member already listed needs no entry.
func TestReservedForRoom(t *testing.T) {
	claim := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "channel"}}
	for i := range 200 {
		claim.Status.ReservedFor = append(claim.Status.ReservedFor, resourceapi.ResourceClaimConsumerReference{Resource: "pods", Name: fmt.Sprintf("other-%d", i), UID: types.UID(fmt.Sprintf("other-%d", i))})
	}
	st := &deviceState{perPod: map[string]map[*corev1.Pod]int{"ns/channel": {}}, inFlight: map[string]int{"ns/channel": 6}}
	var pending []*corev1.Pod
	for i := range 60 {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: fmt.Sprintf("m-%d", i), UID: types.UID(fmt.Sprintf("m-%d", i))}}
		st.perPod["ns/channel"][p] = i
		pending = append(pending, p)
	}
	// 256 - 200 held - 6 in flight = 50 entries for the pending members.
	assert.Empty(t, st.reservedForRoom(pending[49], claim), "the 50th pending member has an entry")
	why := st.reservedForRoom(pending[50], claim)
	assert.Equal(t, "ResourceClaim ns/channel is reserved for each pod that uses it, and its status.reservedFor holds at most 256 (206 taken)", why)

	listed := claim.DeepCopy()
	listed.Status.ReservedFor = append(listed.Status.ReservedFor, resourceapi.ResourceClaimConsumerReference{Resource: "pods", Name: "m-55", UID: "m-55"})
	assert.Empty(t, st.reservedForRoom(pending[55], listed), "a member the claim lists already")
	outside := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "x"}}
	assert.Empty(t, st.reservedForRoom(outside, claim), "a member that reserves the claim for its PodGroup is not numbered")
}

// A member uses a claim its group makes from a template through an entry
// of the same name and template.
func TestTemplateGroupClaim(t *testing.T) {
	claims := []groups.GroupClaim{{Name: "channel", ClaimName: "named"}, {Name: "gpu", TemplateName: "gpu"}}
	pod := func(entries ...corev1.PodResourceClaim) *corev1.Pod {
		return &corev1.Pod{Spec: corev1.PodSpec{ResourceClaims: entries}}
	}
	assert.Equal(t, "gpu", templateGroupClaim(claims, pod(corev1.PodResourceClaim{Name: "gpu", ResourceClaimTemplateName: ptr.To("gpu")})))
	assert.Empty(t, templateGroupClaim(claims, pod(corev1.PodResourceClaim{Name: "channel", ResourceClaimName: ptr.To("named")})), "the group's named claim")
	assert.Empty(t, templateGroupClaim(claims, pod(corev1.PodResourceClaim{Name: "own", ResourceClaimTemplateName: ptr.To("gpu")})), "a claim of its own from the same template")
}
