package groups

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

// TestHierarchyRevision: the revision a validation verdict is remembered
// under must move with every change that can alter the verdict, and must
// not move while members are merely reserved or bound (or the memo would
// never hit during a gang's own scheduling).
func TestHierarchyRevision(t *testing.T) {
	c := NewCache()
	c.SetComposite(composite("root", 2, ""))
	c.SetPodGroup(podGroup("a", 2, "root"))
	c.SetPodGroup(podGroup("b", 2, "root"))
	pods := addMembers(c, inPodGroup("a"), "a", Pending, Pending)
	addMembers(c, inPodGroup("b"), "b", Pending, Pending)

	rev := func(k Key) uint64 {
		t.Helper()
		r, ok := c.HierarchyRevision(k)
		require.True(t, ok)
		return r
	}
	// Every group of the hierarchy answers with the same revision.
	r0 := rev(pgKey("a"))
	assert.Equal(t, r0, rev(pgKey("b")))
	assert.Equal(t, r0, rev(cpgKey("root")))

	unchanged := []struct {
		name string
		do   func()
	}{
		{"reserving a member", func() { c.MarkAssumedOn(pods[0], "n1") }},
		{"releasing a reservation", func() { c.MarkPending(pods[0]) }},
		{"binding a member", func() { c.AddOrUpdatePod(with(pods[1], onNode("n2"))) }},
		{"a status-only update", func() { c.AddOrUpdatePod(with(pods[1], onNode("n2"), withLabel("x", "y"))) }},
	}
	for _, u := range unchanged {
		u.do()
		assert.Equal(t, r0, rev(pgKey("a")), "%s must not change the revision", u.name)
	}

	last := r0
	changes := []struct {
		name string
		do   func()
	}{
		{"a new member of a sibling", func() { addMembers(c, inPodGroup("b"), "b-late", Pending) }},
		{"a member's priority", func() {
			c.AddOrUpdatePod(with(pods[0], func(p *corev1.Pod) { p.Spec.Priority = ptr.To[int32](7) }))
		}},
		{"a member's preemption policy", func() {
			c.AddOrUpdatePod(with(pods[0], func(p *corev1.Pod) {
				p.Spec.Priority = ptr.To[int32](7)
				p.Spec.PreemptionPolicy = ptr.To(corev1.PreemptNever)
			}))
		}},
		{"a member's scheduler name", func() {
			c.AddOrUpdatePod(with(pods[0], func(p *corev1.Pod) {
				p.Spec.Priority = ptr.To[int32](7)
				p.Spec.PreemptionPolicy = ptr.To(corev1.PreemptNever)
				p.Spec.SchedulerName = "other"
			}))
		}},
		{"a member finishing", func() { c.AddOrUpdatePod(with(pods[1], onNode("n2"), inPhase(corev1.PodSucceeded))) }},
		{"a member deleted", func() { c.DeletePod(pods[1]) }},
		{"the root object updated", func() { c.SetComposite(composite("root", 1, "")) }},
		{"a child object updated", func() { c.SetPodGroup(podGroup("b", 1, "root")) }},
		{"a child detached from the root", func() { c.SetPodGroup(podGroup("b", 1, "")) }},
		{"a child deleted", func() { c.DeleteGroup(pgKey("a")) }},
	}
	for _, ch := range changes {
		ch.do()
		got := rev(cpgKey("root"))
		assert.Greater(t, got, last, "%s must change the revision", ch.name)
		last = got
	}
	// The detached child is its own hierarchy now, with its own revision.
	_, ok := c.HierarchyRevision(pgKey("b"))
	assert.True(t, ok)
	_, ok = c.HierarchyRevision(pgKey("nope"))
	assert.False(t, ok)
}

func TestHierarchyCount(t *testing.T) {
	c := NewCache()
	c.SetComposite(composite("root", 2, ""))
	c.SetPodGroup(podGroup("a", 2, "root"))
	c.SetPodGroup(podGroup("b", 2, "root"))
	addMembers(c, inPodGroup("a"), "a", Assumed, Pending, Bound)
	addMembers(c, inPodGroup("b"), "b", Assumed, Assumed, Finished)
	assert.Equal(t, 3, c.HierarchyCount(pgKey("a"), Is(Assumed)))
	assert.Equal(t, 4, c.HierarchyCount(pgKey("b"), Is(Assumed, Bound)))
	assert.Equal(t, 6, c.HierarchyCount(cpgKey("root"), Is(Pending, Assumed, Bound, Finished)))
	assert.Equal(t, 0, c.HierarchyCount(pgKey("nope"), Is(Assumed)))
	// The count agrees with the listing it replaces.
	assert.Len(t, c.HierarchyMembersOf(pgKey("a"), Is(Assumed)), c.HierarchyCount(pgKey("a"), Is(Assumed)))
}
