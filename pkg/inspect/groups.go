package inspect

import (
	"context"

	"github.com/phalanx-sched/phalanx/pkg/debugapi"
	"github.com/phalanx-sched/phalanx/pkg/groups"
)

func groupOf(e groups.Entry) debugapi.Group {
	g := debugapi.Group{
		GroupRef: ref(e.Key), Exists: e.Exists, Policy: policy(e.Gang), TopologyKey: e.TopologyKey,
		DisruptionAll: e.DisruptionAll, PriorityClassName: e.PriorityClassName, Priority: e.Priority,
		PriorityFromMembers: e.PriorityFromMembers, Parent: e.ParentName, Created: nanoTime(e.Created),
		Invalid: e.Invalid, Pending: e.Pending, Assumed: e.Assumed, Bound: e.Bound, Finished: e.Finished,
	}
	if e.Key.Kind == groups.CompositeKind {
		g.MinGroupCount = e.MinGroupCount
	} else {
		g.MinCount = e.MinCount
	}
	if e.PreemptionPolicy != nil {
		g.PreemptionPolicy = string(*e.PreemptionPolicy)
	}
	for _, ch := range e.Children {
		g.Children = append(g.Children, ref(ch))
	}
	for _, m := range e.Members {
		node := m.Node
		if node == "" {
			node = m.Pod.Spec.NodeName
		}
		g.Members = append(g.Members, debugapi.Member{Name: m.Pod.Name, State: stateName(m.State), Node: node})
	}
	return g
}

// Groups is the group cache as it stands: every group, without members.
func (in *Inspector) Groups(context.Context) *debugapi.GroupList {
	out := &debugapi.GroupList{TypeMeta: typeMeta("GroupList"), Answer: in.answer(0), Groups: []debugapi.Group{}}
	for _, e := range in.fed.Entries() {
		out.Groups = append(out.Groups, groupOf(e))
	}
	return out
}

// Group is every group called namespace/name, in any API, with members.
func (in *Inspector) Group(_ context.Context, namespace, name string) (*debugapi.GroupList, error) {
	out := &debugapi.GroupList{TypeMeta: typeMeta("GroupList"), Answer: in.answer(0), Groups: []debugapi.Group{}}
	for _, k := range in.fed.Find(namespace, name, nil) {
		if e, ok := in.fed.Entry(k); ok {
			out.Groups = append(out.Groups, groupOf(e))
		}
	}
	if len(out.Groups) == 0 {
		return nil, notFound("no group %s/%s in the scheduler's group cache", namespace, name)
	}
	return out, nil
}
