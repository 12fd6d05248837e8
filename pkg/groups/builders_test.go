package groups

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	v1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
)

// Fixtures shared by the tests of this package. Every object lives in
// namespace "ns" unless a test says otherwise.

const testNS = "ns"

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func pgKey(name string) Key    { return Key{Kind: PodGroupKind, Namespace: testNS, Name: name} }
func cpgKey(name string) Key   { return Key{Kind: CompositeKind, Namespace: testNS, Name: name} }
func labelKey(name string) Key { return Key{Kind: LabelKind, Namespace: testNS, Name: name} }

// nativeKey is the upstream scheduling.k8s.io PodGroup that
// spec.schedulingGroup names.
func nativeKey(name string) Key {
	return Key{Dialect: Native, Kind: PodGroupKind, Namespace: testNS, Name: name}
}

type podOpt func(*corev1.Pod)

// newPod returns a pod in testNS whose UID is derived from its name.
func newPod(name string, opts ...podOpt) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{
		Namespace:         testNS,
		Name:              name,
		UID:               types.UID("uid-" + name),
		CreationTimestamp: metav1.NewTime(t0),
		Labels:            map[string]string{},
	}}
	for _, o := range opts {
		o(p)
	}
	return p
}

func inPodGroup(name string) podOpt {
	return func(p *corev1.Pod) { p.Labels[v1alpha1.PodGroupLabel] = name }
}

func inLabelGang(name, minAvailable string) podOpt {
	return func(p *corev1.Pod) {
		p.Labels[v1alpha1.LightweightNameLabel] = name
		p.Labels[v1alpha1.LightweightMinAvailableLabel] = minAvailable
	}
}

func withLabel(k, v string) podOpt { return func(p *corev1.Pod) { p.Labels[k] = v } }

func inSpecGroup(name string) podOpt {
	return func(p *corev1.Pod) {
		p.Spec.SchedulingGroup = &corev1.PodSchedulingGroup{PodGroupName: ptr.To(name)}
	}
}

func onNode(node string) podOpt { return func(p *corev1.Pod) { p.Spec.NodeName = node } }

func inPhase(ph corev1.PodPhase) podOpt { return func(p *corev1.Pod) { p.Status.Phase = ph } }

func terminating() podOpt {
	return func(p *corev1.Pod) { p.DeletionTimestamp = ptr.To(metav1.NewTime(t0.Add(time.Hour))) }
}

func createdAt(t time.Time) podOpt {
	return func(p *corev1.Pod) { p.CreationTimestamp = metav1.NewTime(t) }
}

// with returns a copy of pod with opts applied, as an informer update would
// deliver it.
func with(pod *corev1.Pod, opts ...podOpt) *corev1.Pod {
	p := pod.DeepCopy()
	for _, o := range opts {
		o(p)
	}
	return p
}

// podGroup returns a PodGroup; minCount 0 makes it basic, parent "" a root.
func podGroup(name string, minCount int32, parent string) *v1alpha1.PodGroup {
	pg := &v1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{
		Namespace: testNS, Name: name, UID: types.UID("pg-" + name), CreationTimestamp: metav1.NewTime(t0),
	}}
	if minCount > 0 {
		pg.Spec.SchedulingPolicy.Gang = &v1alpha1.GangSchedulingPolicy{MinCount: minCount}
	} else {
		pg.Spec.SchedulingPolicy.Basic = &v1alpha1.BasicSchedulingPolicy{}
	}
	if parent != "" {
		pg.Spec.ParentCompositePodGroupName = ptr.To(parent)
	}
	return pg
}

// composite returns a CompositePodGroup; minGroupCount 0 makes it basic.
func composite(name string, minGroupCount int32, parent string) *v1alpha1.CompositePodGroup {
	cpg := &v1alpha1.CompositePodGroup{ObjectMeta: metav1.ObjectMeta{
		Namespace: testNS, Name: name, UID: types.UID("cpg-" + name), CreationTimestamp: metav1.NewTime(t0),
	}}
	if minGroupCount > 0 {
		cpg.Spec.SchedulingPolicy.Gang = &v1alpha1.CompositeGangSchedulingPolicy{MinGroupCount: minGroupCount}
	} else {
		cpg.Spec.SchedulingPolicy.Basic = &v1alpha1.CompositeBasicSchedulingPolicy{}
	}
	if parent != "" {
		cpg.Spec.ParentCompositePodGroupName = ptr.To(parent)
	}
	return cpg
}

// addMembers adds one pod per state to the group that attach names, called
// prefix-0, prefix-1, ..., and brings each to its state the way the
// scheduler and the informers would.
func addMembers(c *Cache, attach podOpt, prefix string, states ...State) []*corev1.Pod {
	var pods []*corev1.Pod
	for i, s := range states {
		p := newPod(fmt.Sprintf("%s-%d", prefix, i), attach)
		c.AddOrUpdatePod(p)
		switch s {
		case Assumed:
			c.MarkAssumedOn(p, "")
		case Bound:
			p = with(p, onNode("node-1"))
			c.AddOrUpdatePod(p)
		case Finished:
			p = with(p, inPhase(corev1.PodSucceeded))
			c.AddOrUpdatePod(p)
		}
		pods = append(pods, p)
	}
	return pods
}

// stateCounts returns the per-state member counts the cache keeps for k.
func stateCounts(c *Cache, k Key) ([numStates]int, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	g := c.groups[k]
	if g == nil {
		return [numStates]int{}, false
	}
	return g.counts, true
}

// memberState returns the state the cache records for a member of k.
func memberState(c *Cache, k Key, uid types.UID) (State, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	g := c.groups[k]
	if g == nil {
		return 0, false
	}
	m := g.members[uid]
	if m == nil {
		return 0, false
	}
	return m.State, true
}

// tracked reports whether the cache holds k at all, placeholder or not.
func tracked(c *Cache, k Key) bool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	_, ok := c.groups[k]
	return ok
}

// assertConsistent checks the cache's internal bookkeeping: counts match the
// members, the pod index matches the members, child links match parents,
// and nothing is kept that garbage collection should have dropped.
func assertConsistent(t *testing.T, c *Cache) {
	t.Helper()
	c.mu.RLock()
	defer c.mu.RUnlock()
	indexed := 0
	for k, g := range c.groups {
		assert.Equal(t, k, g.Key, "group stored under another key")
		var tally [numStates]int
		for uid, m := range g.members {
			tally[m.State]++
			assert.Same(t, m, g.byState[m.State][uid], "member %s is not filed under its state", uid)
			assert.Equal(t, k, c.pods[uid], "pod index of member %s", uid)
			assert.Equal(t, uid, m.Pod.UID, "member stored under another UID")
			indexed++
		}
		assert.Equal(t, tally, g.counts, "counts of %s do not match its members", k)
		for st := State(0); st < numStates; st++ {
			assert.Len(t, g.byState[st], tally[st], "%s files members under state %d that it no longer has", k, st)
		}
		if !g.IsLeaf() {
			assert.Empty(t, g.members, "composite %s has members", k)
		}
		if k.Kind == LabelKind {
			assert.Equal(t, len(g.members) > 0, g.Exists, "label group %s exists iff it has members", k)
			votes := map[int]int{}
			for _, m := range g.members {
				if m.State != Finished {
					votes[m.minAvailable]++
				}
			}
			assert.Equal(t, votes, nonNil(g.minVotes), "min-available tally of %s does not match its live members", k)
		}
		assert.True(t, g.Exists || len(g.members) > 0 || len(g.children) > 0,
			"%s has no object, members or children and should have been collected", k)
		for ck := range g.children {
			ch := c.groups[ck]
			if assert.NotNil(t, ch, "%s lists a child %s that is not cached", k, ck) {
				assert.Equal(t, k.Name, ch.ParentName, "child %s of %s names another parent", ck, k)
			}
		}
		if g.ParentName != "" {
			p := c.groups[Key{Kind: CompositeKind, Namespace: k.Namespace, Name: g.ParentName}]
			if assert.NotNil(t, p, "parent of %s is not cached", k) {
				assert.Contains(t, p.children, k, "parent of %s does not list it", k)
			}
		}
	}
	assert.Equal(t, len(c.pods), indexed, "pod index has entries that are no group's member")
}

func nonNil(m map[int]int) map[int]int {
	if m == nil {
		return map[int]int{}
	}
	return m
}
