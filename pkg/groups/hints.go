package groups

import (
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
)

// EventPod resolves the pod a cluster event is about once for every
// question the scheduling queue asks about it. The queue runs a plugin's
// queueing hint for each pod it holds, in a row, with the same object: a
// burst of gangs being created asks millions of times whether the pod
// just created belongs to a held pod's hierarchy.
type EventPod struct {
	last atomic.Pointer[eventFacts]
}

type eventFacts struct {
	pod     *corev1.Pod
	grouped bool
	leaf    Key
	root    Key
	rooted  bool
}

func (e *EventPod) facts(c *Cache, other *corev1.Pod) eventFacts {
	if f := e.last.Load(); f != nil && f.pod == other {
		return *f
	}
	f := eventFacts{pod: other}
	if a, grouped, err := Attach(other); grouped && err == nil {
		f.grouped, f.leaf = true, a.Key
		f.root, f.rooted = c.RootOf(a.Key)
	}
	e.last.Store(&f)
	return f
}

// SameHierarchy reports whether other (the pod of an event, resolved
// through e) belongs to the hierarchy of held, a pod the queue holds.
// held's group is read from the cache, not parsed from its labels; a held
// pod the cache does not track is judged by its labels. held must not be
// other.
func (c *Cache) SameHierarchy(e *EventPod, held, other *corev1.Pod) bool {
	leaf, tracked := c.GroupOf(held.UID)
	if !tracked {
		a, grouped, err := Attach(held)
		if !grouped || err != nil {
			return false
		}
		leaf = a.Key
	}
	f := e.facts(c, other)
	if !f.grouped {
		return false
	}
	if leaf == f.leaf {
		return true
	}
	if !f.rooted || f.root == f.leaf {
		// other's group has no parent the cache knows: it could only be
		// in held's hierarchy as held's own leaf, which it is not.
		return false
	}
	root, ok := c.RootOf(leaf)
	return ok && root == f.root
}
