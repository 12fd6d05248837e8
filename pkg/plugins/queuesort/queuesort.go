// Package queuesort orders the scheduling queue so that gangs never
// interleave: by priority, then gangs already partly bound, then by the
// group's creation time (the pod's own
// for plain pods), then by group identity, then by pod. Members of one group
// compare equal on everything but the last key, so they sit next to each
// other and a gang is attempted as a block instead of deadlocking in Permit
// against a sibling gang.
package queuesort

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/phalanx-sched/phalanx/pkg/groups"
)

// Name is the plugin's name in a KubeSchedulerConfiguration.
const Name = "PhalanxQueueSort"

// QueueSort implements fwk.QueueSortPlugin.
type QueueSort struct {
	groups *groups.Fed
}

var _ fwk.QueueSortPlugin = &QueueSort{}

// New builds the plugin; it shares the scheduler's group cache.
func New(ctx context.Context, _ runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
	g, err := groups.Shared(ctx, h.SharedInformerFactory(), h.KubeConfig())
	if err != nil {
		return nil, fmt.Errorf("%s: %w", Name, err)
	}
	return &QueueSort{groups: g}, nil
}

// Name returns the plugin name.
func (*QueueSort) Name() string { return Name }

type sortKey struct {
	priority int32
	// partial: the pod's gang has members bound but fewer than its
	// minimum, e.g. after a scheduler stopped in the middle of its binds.
	partial bool
	created time.Time
	group   string // "" for plain pods
	pod     string
}

func (q *QueueSort) key(e fwk.QueuedEntityInfo) sortKey {
	k := sortKey{priority: e.GetPriority(), created: e.GetTimestamp()}
	pi, ok := e.(interface{ GetPodInfo() fwk.PodInfo })
	if !ok || pi.GetPodInfo() == nil {
		return k
	}
	pod := pi.GetPodInfo().GetPod()
	k.pod = pod.Namespace + "/" + pod.Name
	k.created = pod.CreationTimestamp.Time
	if ch, grouped, err := q.groups.ChainOf(pod); grouped && err == nil {
		root := ch.Root()
		// The queue has the pod's own priority; members share the group's
		// (PreFilter rejects groups whose members disagree).
		k.created = time.Unix(0, root.Created)
		k.group = root.Key.String()
		leaf := ch.Leaf()
		k.partial = leaf.Gang && leaf.Bound > 0 && leaf.Bound < leaf.MinCount
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
	if !ka.created.Equal(kb.created) {
		return ka.created.Before(kb.created)
	}
	if ka.group != kb.group {
		// Grouped pods before plain pods created in the same instant, then
		// a stable order between groups.
		if ka.group == "" || kb.group == "" {
			return kb.group == ""
		}
		return ka.group < kb.group
	}
	if ka.pod != kb.pod {
		return ka.pod < kb.pod
	}
	return a.GetTimestamp().Before(b.GetTimestamp())
}
