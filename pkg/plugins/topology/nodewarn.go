package topology

import (
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/events"

	"github.com/phalanx-sched/phalanx/pkg/placement"
)

// unusableWarnInterval spaces the warnings about one node that stays
// unusable: plans run many times a second, and the node needs an operator,
// not an event per plan.
const unusableWarnInterval = 10 * time.Minute

// reasonNodeTotalsOverflow is the reason of the Warning event on a node
// that plans leave out because its resource totals are negative.
const reasonNodeTotalsOverflow = "PhalanxNodeTotalsOverflow"

// nodeWarnings tells operators about nodes the planner leaves out, once per
// node and problem, and again every unusableWarnInterval while it lasts.
type nodeWarnings struct {
	now func() time.Time

	mu   sync.Mutex
	last map[string]warned // node name -> last warning
}

type warned struct {
	reason string
	at     time.Time
}

// report warns about the table's unusable nodes that are due, and forgets
// nodes that became usable, so a node that breaks again is reported again.
// node looks up the Node object an event refers to; nil when it is gone.
func (w *nodeWarnings) report(recorder events.EventRecorder, table *placement.NodeTable, node func(name string) *corev1.Node) {
	bad := table.Unusable()
	w.mu.Lock()
	if len(bad) == 0 && len(w.last) == 0 {
		w.mu.Unlock()
		return
	}
	if w.last == nil {
		w.last = map[string]warned{}
	}
	now := time.Now()
	if w.now != nil {
		now = w.now()
	}
	current := make(map[string]bool, len(bad))
	var due []placement.UnusableNode
	for _, n := range bad {
		current[n.Name] = true
		prev, seen := w.last[n.Name]
		if seen && prev.reason == n.Reason && now.Sub(prev.at) < unusableWarnInterval {
			continue
		}
		w.last[n.Name] = warned{reason: n.Reason, at: now}
		due = append(due, n)
	}
	for name := range w.last {
		if !current[name] {
			delete(w.last, name)
		}
	}
	w.mu.Unlock()
	for _, n := range due {
		obj := node(n.Name)
		if obj == nil {
			continue
		}
		recorder.Eventf(obj, nil, corev1.EventTypeWarning, reasonNodeTotalsOverflow, "Scheduling",
			"%s leaves this node out of group placement: %s", Name, n.Reason)
	}
}

// snapshotNode is the scheduler snapshot's Node object of that name.
func (t *Topology) snapshotNode(name string) *corev1.Node {
	ni, err := t.handle.SnapshotSharedLister().NodeInfos().Get(name)
	if err != nil {
		return nil
	}
	return ni.Node()
}
