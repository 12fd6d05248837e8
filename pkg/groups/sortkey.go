package groups

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// SortFacts is what the scheduling queue orders a grouped pod by, besides
// its priority and name: its hierarchy's root, when that root was created,
// and whether its leaf gang is partly bound.
type SortFacts struct {
	Root Key
	// RootName is Root.String(), formatted once per hierarchy change
	// rather than on each of the queue's comparisons.
	RootName string
	// Created is the root's creation time in unix nanoseconds.
	Created int64
	// Partial: the leaf is a gang with members bound but fewer than its
	// minimum.
	Partial bool
}

// sortEntry remembers a member's SortFacts but Partial, which is read live.
// It answers while the member's pod object and the cache's structure are
// the ones it was computed from.
type sortEntry struct {
	pod       *corev1.Pod
	structure uint64
	leaf      Key
	facts     SortFacts
}

// bumpStructureLocked records that a hierarchy's shape changed: a group
// object was set or deleted, a parent link moved, a label gang appeared,
// went, or got an earlier creation time. Every remembered sort key is then
// stale. Members being reserved, bound or added to an existing group leave
// it alone, which is what lets the queue's keys outlive them.
func (c *Cache) bumpStructureLocked() { c.structure++ }

// SortFactsOf returns what the queue orders pod by; grouped is false for a
// pod in no group or one whose hierarchy cannot be resolved (the queue
// orders those as plain pods). The answer is remembered per member and
// recomputed only when the member's pod object or a hierarchy's shape
// changed, so one comparison costs a map lookup and no formatting.
func (c *Cache) SortFactsOf(pod *corev1.Pod) (f SortFacts, grouped bool) {
	c.mu.RLock()
	if e := c.sortKeys[pod.UID]; e != nil && e.pod == pod && e.structure == c.structure {
		f = e.facts
		if g := c.groups[e.leaf]; g != nil {
			f.Partial = g.partial()
		}
		c.mu.RUnlock()
		return f, true
	}
	c.mu.RUnlock()
	a, isGrouped, err := Attach(pod)
	if !isGrouped || err != nil {
		return f, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	chain, err := c.chainLocked(a.Key)
	if err != nil {
		return f, false
	}
	root := chain[len(chain)-1]
	f = SortFacts{Root: root.Key, RootName: root.Key.String(), Created: root.Created.UnixNano()}
	// Only tracked members are remembered: their entry goes with them
	// (removeMemberLocked), so no pod the cache has forgotten is kept.
	if c.pods[pod.UID] == a.Key {
		if c.sortKeys == nil {
			c.sortKeys = map[types.UID]*sortEntry{}
		}
		c.sortKeys[pod.UID] = &sortEntry{pod: pod, structure: c.structure, leaf: a.Key, facts: f}
	}
	f.Partial = chain[0].partial()
	return f, true
}

// partial reports whether g is a gang with members bound but fewer than
// its minimum.
func (g *Group) partial() bool {
	b := g.counts[Bound]
	return g.Gang && b > 0 && b < g.MinCount
}
