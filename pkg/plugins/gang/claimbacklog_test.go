package gang

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

func claimPod(name string) *corev1.Pod {
	p := drainPod(name)
	p.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: ptr.To("gpu")}}
	return p
}

// A pod with claims waits while the limit of admitted pods with claims
// are still binding, and goes as soon as one of them finishes; pods
// without claims, and members not let through Permit, do not count; the
// wait is bounded, and a stopping scheduler does not wait.
func TestClaimBacklogHoldsPodsWithClaimsUntilABindFinishes(t *testing.T) {
	d := NewDrain()
	d.admit("PodGroup ns/g", []*corev1.Pod{claimPod("g-0"), claimPod("g-1"), drainPod("plain-0"), drainPod("plain-1")})
	assert.Less(t, d.awaitClaimBacklog(context.Background(), 3, time.Minute), 50*time.Millisecond,
		"two pods with claims bind: below a limit of three, nothing waits")

	d.admit("PodGroup ns/h", []*corev1.Pod{claimPod("h-0")})
	// Admitting a pod again (a gang let through after a retry) counts it once.
	d.admit("PodGroup ns/h", []*corev1.Pod{claimPod("h-0")})
	waited := make(chan time.Duration)
	go func() { waited <- d.awaitClaimBacklog(context.Background(), 3, time.Minute) }()
	d.finish("plain-0", true)
	d.finish("never-admitted", false)
	select {
	case w := <-waited:
		t.Fatalf("went on after %v with three pods with claims still binding", w)
	case <-time.After(50 * time.Millisecond):
	}
	d.finish("g-1", false) // a failed bind frees its place too
	select {
	case <-waited:
	case <-time.After(5 * time.Second):
		t.Fatal("still waiting after a pod with claims finished")
	}

	d.admit("PodGroup ns/k", []*corev1.Pod{claimPod("k-0")})
	w := d.awaitClaimBacklog(context.Background(), 3, 30*time.Millisecond)
	assert.GreaterOrEqual(t, w, 30*time.Millisecond, "the wait lasts its bound")
	assert.Less(t, w, 5*time.Second)

	d.Stop()
	assert.Less(t, d.awaitClaimBacklog(context.Background(), 3, time.Minute), 50*time.Millisecond, "a stopping scheduler does not wait")
}
