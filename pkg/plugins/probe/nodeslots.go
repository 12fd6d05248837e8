package probe

import fwk "k8s.io/kube-scheduler/framework"

// NodeSlots keeps one T per position of a snapshot's node list, read again
// only where the node at a position, or its NodeInfo generation, changed
// since the last Sync. The snapshot keeps its order while no node is
// added or removed, so after a bind a few slots are read again, not
// thousands. The affinity index and the planner's memo of running pods'
// anti-affinity terms (planinput.TermMemo) keep their per-node state here.
// Not safe for concurrent use.
type NodeSlots[T any] struct {
	names []string
	gens  []int64
	slots []T
}

// Sync brings the slots to infos. gone gets the slot of each position the
// list no longer has; changed makes the slot of each position whose node
// or generation moved, from its NodeInfo and the slot it had (same: the
// same node, which changed).
func (s *NodeSlots[T]) Sync(infos []fwk.NodeInfo, gone func(i int, old T), changed func(i int, ni fwk.NodeInfo, old T, same bool) T) {
	for i := len(infos); i < len(s.slots); i++ {
		gone(i, s.slots[i])
	}
	if len(s.slots) > len(infos) {
		s.names, s.gens, s.slots = s.names[:len(infos)], s.gens[:len(infos)], s.slots[:len(infos)]
	}
	var zero T
	for len(s.slots) < len(infos) {
		s.names, s.gens, s.slots = append(s.names, ""), append(s.gens, -1), append(s.slots, zero)
	}
	for i, ni := range infos {
		name := ""
		if n := ni.Node(); n != nil {
			name = n.Name
		}
		if s.names[i] == name && s.gens[i] == ni.GetGeneration() {
			continue
		}
		s.slots[i] = changed(i, ni, s.slots[i], s.names[i] == name)
		s.names[i], s.gens[i] = name, ni.GetGeneration()
	}
}

// Slots are the slots, by position in the list of the last Sync.
func (s *NodeSlots[T]) Slots() []T { return s.slots }
