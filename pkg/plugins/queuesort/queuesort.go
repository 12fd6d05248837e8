// Package queuesort orders the scheduling queue so that gangs never
// interleave: by priority, then gangs the scheduler left partly bound, then
// by queue time (for a group, the latest of its root's creation and its
// youngest pending member's; a plain pod's own creation), then by group
// identity, then by pod. Members of one group compare equal on everything
// but the last key, so they sit next to each other and a gang is attempted
// as a block instead of deadlocking in Permit against a sibling gang. How
// the group facts are kept from being gamed is groups.SortFacts' concern.
package queuesort

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/phalanx-sched/phalanx/pkg/groupcache"
	"github.com/phalanx-sched/phalanx/pkg/plugins/pluginrt"
)

// Name is the plugin's name in a KubeSchedulerConfiguration.
const Name = pluginrt.QueueSortName

// QueueSort implements fwk.QueueSortPlugin.
type QueueSort struct {
	groups *groupcache.Fed
}

var _ fwk.QueueSortPlugin = &QueueSort{}

// Factory returns the plugin's factory for the scheduler that rt serves;
// the plugin reads the scheduler's group cache.
func Factory(rt *pluginrt.Runtime) func(context.Context, runtime.Object, fwk.Handle) (fwk.Plugin, error) {
	return func(ctx context.Context, _ runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
		inst, err := rt.Instance(ctx, h)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", Name, err)
		}
		return &QueueSort{groups: inst.Groups}, nil
	}
}

// Name returns the plugin name.
func (*QueueSort) Name() string { return Name }

// sortKey is what Less compares. Every field is a value: the group's name
// comes formatted from the cache (SortFactsOf), which remembers it per
// member, so a comparison neither resolves a hierarchy nor formats a
// string.
type sortKey struct {
	priority int32
	// partial: the pod's gang has members the scheduler bound but fewer
	// than its minimum, e.g. after a scheduler stopped in the middle of its
	// binds.
	partial bool
	created int64  // queue time, unix nanoseconds
	group   string // "" for plain pods
	// namespace and name of the pod, compared as "namespace/name".
	namespace, name string
}

func (q *QueueSort) key(e fwk.QueuedEntityInfo) sortKey {
	k := sortKey{priority: e.GetPriority(), created: e.GetTimestamp().UnixNano()}
	pi, ok := e.(interface{ GetPodInfo() fwk.PodInfo })
	if !ok || pi.GetPodInfo() == nil {
		return k
	}
	pod := pi.GetPodInfo().GetPod()
	k.namespace, k.name = pod.Namespace, pod.Name
	k.created = pod.CreationTimestamp.UnixNano()
	if f, grouped := q.groups.SortFactsOf(pod); grouped {
		// The queue has the pod's own priority; members share the group's
		// (PreFilter rejects groups whose members disagree). f.Created is
		// never before the pod's own creation.
		k.created = f.Created
		k.group = f.RootName
		k.partial = f.Partial
	}
	return k
}

// Less orders two queue entries.
func (q *QueueSort) Less(a, b fwk.QueuedEntityInfo) bool {
	ka, kb := q.key(a), q.key(b)
	if ka.priority != kb.priority {
		return ka.priority > kb.priority
	}
	if ka.partial != kb.partial {
		// A gang with members already bound holds that room while it is
		// below its minimum, and its planner keeps it in the bound
		// members' domain: finishing it first keeps other pods of the same
		// priority from taking the room its last members need.
		return ka.partial
	}
	if ka.created != kb.created {
		return ka.created < kb.created
	}
	if ka.group != kb.group {
		// Grouped pods before plain pods created in the same instant, then
		// a stable order between groups.
		if ka.group == "" || kb.group == "" {
			return kb.group == ""
		}
		return ka.group < kb.group
	}
	if c := compareJoined(ka.namespace, ka.name, kb.namespace, kb.name); c != 0 {
		return c < 0
	}
	return a.GetTimestamp().Before(b.GetTimestamp())
}

// compareJoined compares a1+"/"+a2 with b1+"/"+b2 without building either.
func compareJoined(a1, a2, b1, b2 string) int {
	ai, bi := 0, 0
	la, lb := len(a1)+1+len(a2), len(b1)+1+len(b2)
	at := func(s1, s2 string, i int) byte {
		switch {
		case i < len(s1):
			return s1[i]
		case i == len(s1):
			return '/'
		default:
			return s2[i-len(s1)-1]
		}
	}
	for ai < la && bi < lb {
		ca, cb := at(a1, a2, ai), at(b1, b2, bi)
		if ca != cb {
			if ca < cb {
				return -1
			}
			return 1
		}
		ai++
		bi++
	}
	switch {
	case la < lb:
		return -1
	case la > lb:
		return 1
	}
	return 0
}
