package inspect

import (
	"fmt"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/phalanx-sched/phalanx/pkg/debugapi"
	"github.com/phalanx-sched/phalanx/pkg/groups"
	"github.com/phalanx-sched/phalanx/pkg/placement"
)

// ref names a group key the way kubectl addresses it.
func ref(k groups.Key) debugapi.GroupRef {
	r := debugapi.GroupRef{Namespace: k.Namespace, Name: k.Name, APIGroup: k.Dialect.String()}
	switch k.Kind {
	case groups.PodGroupKind:
		r.Kind = "PodGroup"
	case groups.CompositeKind:
		r.Kind = "CompositePodGroup"
	default:
		r.Kind, r.APIGroup = "LabelGang", ""
	}
	return r
}

func policy(gang bool) string {
	if gang {
		return "Gang"
	}
	return "Basic"
}

func stateName(s groups.State) string {
	switch s {
	case groups.Pending:
		return "Pending"
	case groups.Assumed:
		return "Assumed"
	case groups.Bound:
		return "Bound"
	default:
		return "Finished"
	}
}

func timeOf(t time.Time) *metav1.Time {
	if t.IsZero() {
		return nil
	}
	mt := metav1.NewTime(t)
	return &mt
}

func nanoTime(n int64) *metav1.Time {
	if n == 0 {
		return nil
	}
	return timeOf(time.Unix(0, n))
}

// quantities renders planner quantities (cpu in millicores) as a user
// writes them in a pod spec.
func quantities(r placement.Resources) map[string]string {
	if len(r) == 0 {
		return nil
	}
	out := make(map[string]string, len(r))
	for name, v := range r {
		out[string(name)] = quantity(name, v)
	}
	return out
}

func quantity(name corev1.ResourceName, v int64) string {
	switch name {
	case corev1.ResourceCPU:
		return resource.NewMilliQuantity(v, resource.DecimalSI).String()
	case corev1.ResourceMemory, corev1.ResourceEphemeralStorage:
		return resource.NewQuantity(v, resource.BinarySI).String()
	default:
		return fmt.Sprint(v)
	}
}

func infeasible(e *placement.Infeasible) *debugapi.Infeasible {
	if e == nil {
		return nil
	}
	out := &debugapi.Infeasible{Group: e.Group, Reason: e.Reason, TopologyKey: e.TopologyKey, BestDomain: e.BestDomain,
		Fits: e.Fits, Need: e.Need, Short: quantities(e.Short), Cause: infeasible(e.Cause)}
	for _, d := range e.Domains {
		out.Domains = append(out.Domains, debugapi.DomainFit{Domain: d.Domain, Fits: d.Fits, Need: d.Need, Short: quantities(d.Short), Reason: d.Reason})
	}
	return out
}

// podNames maps the planner's pod keys (UIDs) of a hierarchy's members to
// namespace/name.
func podNames(t *groups.Tree) map[string]string {
	out := map[string]string{}
	var walk func(*groups.Tree)
	walk = func(t *groups.Tree) {
		for _, m := range t.Members {
			out[string(m.Pod.UID)] = m.Pod.Namespace + "/" + m.Pod.Name
		}
		for _, ch := range t.Children {
			walk(ch)
		}
	}
	walk(t)
	return out
}

// groupKeys maps the planner's group names (Key strings) to the keys of a
// hierarchy, for naming domains.
func topologyKeys(t *groups.Tree) map[string]string {
	out := map[string]string{}
	var walk func(*groups.Tree)
	walk = func(t *groups.Tree) {
		if t.TopologyKey != "" {
			out[t.Key.String()] = t.TopologyKey
		}
		for _, ch := range t.Children {
			walk(ch)
		}
	}
	walk(t)
	return out
}

func placementOf(p *placement.Plan, t *groups.Tree) *debugapi.Placement {
	if p == nil {
		return nil
	}
	names, keys := podNames(t), topologyKeys(t)
	out := &debugapi.Placement{Pods: map[string]string{}}
	for uid, node := range p.Assignments {
		out.Pods[names[uid]] = node
	}
	for g, v := range p.Domains {
		if out.Domains == nil {
			out.Domains = map[string]string{}
		}
		out.Domains[g] = keys[g] + "=" + v
	}
	for _, uid := range p.Unplaced {
		out.Unplaced = append(out.Unplaced, names[uid])
	}
	sort.Strings(out.Unplaced)
	return out
}

func conditions(cs []metav1.Condition) []debugapi.Condition {
	var out []debugapi.Condition
	for _, c := range cs {
		out = append(out, debugapi.Condition{Type: c.Type, Status: string(c.Status), Reason: c.Reason, Message: c.Message, Since: c.LastTransitionTime})
	}
	return out
}
