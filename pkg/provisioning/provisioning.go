package provisioning

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
	"github.com/phalanx-sched/phalanx/pkg/provisioning/autoscalingv1"
)

const (
	// GroupAnnotation on a PodGroup opts it in: ModeAtomic asks the
	// autoscaler for all the nodes its pending members need, or none.
	GroupAnnotation = "scheduling.phalanx.dev/provisioning"
	ModeAtomic      = "atomic"

	// ForLabel on a request and its PodTemplates names the PodGroup they
	// were made for (the owner reference carries its UID).
	ForLabel = "scheduling.phalanx.dev/provisioning-for"
	// AttemptAnnotation on a request numbers the group's attempts from 1.
	AttemptAnnotation = "scheduling.phalanx.dev/provisioning-attempt"

	// ConditionType is the PodGroup condition phalanx-controller writes
	// about the group's request.
	ConditionType = "CapacityRequested"
	// Its reasons: the request waits for the autoscaler, the autoscaler
	// provisioned it, it failed (a retry follows), the capacity it
	// provisioned was not used in time or was revoked (a new request
	// follows), or it was withdrawn because the gang found room first.
	ReasonRequested   = "Requested"
	ReasonProvisioned = "Provisioned"
	ReasonFailed      = "ProvisioningFailed"
	ReasonExpired     = "CapacityExpired"
	// ReasonNotNeeded: the gang was placed before the autoscaler
	// provisioned its request, which was withdrawn.
	ReasonNotNeeded = "NotNeeded"

	// MaxPodSets is the API's limit of pod sets per request.
	MaxPodSets = 32
)

// PodSet is one shape of pending member and how many of them there are.
type PodSet struct {
	Template corev1.PodTemplateSpec
	Count    int32
}

// PodSets groups pods by what decides where they fit (TemplateOf) and
// returns one PodSet per shape, in the order of each shape's first pod by
// name, so the same pods always give the same request. A shape's template
// keeps only the labels all its pods share with equal values: labels
// matter to affinity and spread, but one that numbers the pods (a Job's
// completion index) must not split a shape into one set per pod.
func PodSets(pods []*corev1.Pod) []PodSet {
	sorted := slices.Clone(pods)
	slices.SortFunc(sorted, func(a, b *corev1.Pod) int {
		if a.Name < b.Name {
			return -1
		}
		if a.Name > b.Name {
			return 1
		}
		return 0
	})
	var out []PodSet
	index := map[string]int{}
	for _, p := range sorted {
		t := TemplateOf(p)
		k := shapeKey(t)
		i, seen := index[k]
		if !seen {
			i = len(out)
			index[k] = i
			t.Labels = maps.Clone(p.Labels)
			out = append(out, PodSet{Template: t})
		} else {
			common := out[i].Template.Labels
			for l, v := range common {
				if p.Labels[l] != v {
					delete(common, l)
				}
			}
		}
		out[i].Count++
	}
	return out
}

// TemplateOf is the pod as the autoscaler should imagine it: its
// scheduling-relevant spec (resources, host ports, node selector,
// affinity, tolerations, spread, priority, runtime class, overhead,
// resource claims), without its node, gates, volumes or anything that
// names this one pod. Labels are left to PodSets.
func TemplateOf(p *corev1.Pod) corev1.PodTemplateSpec {
	s := p.Spec
	spec := corev1.PodSpec{
		NodeSelector:              s.NodeSelector,
		Affinity:                  s.Affinity,
		Tolerations:               s.Tolerations,
		TopologySpreadConstraints: s.TopologySpreadConstraints,
		PriorityClassName:         s.PriorityClassName,
		PreemptionPolicy:          s.PreemptionPolicy,
		RuntimeClassName:          s.RuntimeClassName,
		Overhead:                  s.Overhead,
		ResourceClaims:            s.ResourceClaims,
		Resources:                 s.Resources,
		SchedulerName:             s.SchedulerName,
		RestartPolicy:             s.RestartPolicy,
	}
	strip := func(cs []corev1.Container) []corev1.Container {
		var out []corev1.Container
		for _, c := range cs {
			out = append(out, corev1.Container{
				Name:          c.Name,
				Image:         c.Image,
				Resources:     c.Resources,
				Ports:         hostPorts(c.Ports),
				RestartPolicy: c.RestartPolicy,
			})
		}
		return out
	}
	spec.Containers = strip(s.Containers)
	spec.InitContainers = strip(s.InitContainers)
	return corev1.PodTemplateSpec{Spec: *spec.DeepCopy()}
}

// hostPorts keeps the ports that bind on the node: only those limit
// where a pod fits.
func hostPorts(ps []corev1.ContainerPort) []corev1.ContainerPort {
	var out []corev1.ContainerPort
	for _, p := range ps {
		if p.HostPort != 0 {
			out = append(out, p)
		}
	}
	return out
}

func shapeKey(t corev1.PodTemplateSpec) string {
	b, err := json.Marshal(t.Spec)
	if err != nil {
		// A PodSpec always marshals; a failure would only split shapes.
		return fmt.Sprintf("%p", &t)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// RequestName is the name of a group's attempt; a name too long for the
// API is shortened with a hash of the whole, so it stays unique.
func RequestName(group string, attempt int) string {
	return fit(fmt.Sprintf("%s-provreq-%d", group, attempt))
}

// TemplateName is the name of a request's i-th PodTemplate.
func TemplateName(request string, i int) string {
	return fit(fmt.Sprintf("%s-%d", request, i))
}

// fit keeps a name within the 253 characters of a DNS subdomain.
func fit(name string) string {
	const limit = 253
	if len(name) <= limit {
		return name
	}
	sum := sha256.Sum256([]byte(name))
	h := hex.EncodeToString(sum[:])[:16]
	return name[:limit-len(h)-1] + "-" + h
}

// Attempt reads a request's attempt number; 0 when it has none.
func Attempt(obj metav1.Object) int {
	n, err := strconv.Atoi(obj.GetAnnotations()[AttemptAnnotation])
	if err != nil || n < 0 {
		return 0
	}
	return n
}

// Phase is where the autoscaler is with a request.
type Phase int

const (
	// Waiting: not answered yet, or the autoscaler is still looking for
	// the capacity (Provisioned False, not Failed).
	Waiting Phase = iota
	// Done: Provisioned True; the nodes exist.
	Done
	// Failed: the autoscaler gave up on it.
	Failed
	// Lapsed: provisioned, but the booking expired or the capacity was
	// revoked before the gang bound.
	Lapsed
)

// PhaseOf reads the autoscaler's conditions, the terminal ones first, and
// returns the condition that decided (nil while Waiting without one).
func PhaseOf(conds []metav1.Condition) (Phase, *metav1.Condition) {
	if c := meta.FindStatusCondition(conds, autoscalingv1.Failed); c != nil && c.Status == metav1.ConditionTrue {
		return Failed, c
	}
	for _, t := range []string{autoscalingv1.BookingExpired, autoscalingv1.CapacityRevoked} {
		if c := meta.FindStatusCondition(conds, t); c != nil && c.Status == metav1.ConditionTrue {
			return Lapsed, c
		}
	}
	c := meta.FindStatusCondition(conds, autoscalingv1.Provisioned)
	if c != nil && c.Status == metav1.ConditionTrue {
		return Done, c
	}
	return Waiting, c
}

// Backoff spaces a group's attempts after a failure: Initial after the
// first, doubling with each further one, at most Max.
type Backoff struct {
	Initial, Max time.Duration
}

// DefaultBackoff waits a minute after the first failure and at most half
// an hour: an autoscaler that failed atomically usually lacks quota or
// stock, which does not come back in seconds.
var DefaultBackoff = Backoff{Initial: time.Minute, Max: 30 * time.Minute}

// After is the wait after the failure of the given attempt (from 1).
func (b Backoff) After(attempt int) time.Duration {
	d := b.Initial
	for i := 1; i < attempt && d < b.Max; i++ {
		d *= 2
	}
	return min(d, b.Max)
}

// Gang is what decides whether a group needs capacity, read from its
// object and its members.
type Gang struct {
	// Schedulable is the scheduler's Schedulable condition on the group,
	// nil before the scheduler judged it.
	Schedulable *metav1.Condition
	// MinCount and Placed: the gang's minimum and its members with a node.
	MinCount, Placed int
	// Pending members: not terminating, no node yet.
	Pending []*corev1.Pod
}

// Short reports whether g is a gang the autoscaler's nodes may help: the
// scheduler found no room for it (Schedulable False with reason
// Unschedulable, not Invalid or WaitingForPods), it is below its minimum,
// it has pending members, and no preemption is making room for it (no
// pending member is nominated to a node). It must have been so for at
// least after; wait is what remains of that. why says why not, for logs.
func Short(g Gang, now time.Time, after time.Duration) (ok bool, wait time.Duration, why string) {
	c := g.Schedulable
	switch {
	case c == nil:
		return false, 0, "the scheduler has not judged the group yet"
	case c.Status != metav1.ConditionFalse || c.Reason != v1alpha1.ReasonUnschedulable:
		return false, 0, fmt.Sprintf("the group is %s=%s (%s), not short of capacity", c.Type, c.Status, c.Reason)
	case g.Placed >= g.MinCount:
		return false, 0, "the gang has its minimum placed"
	case len(g.Pending) == 0:
		return false, 0, "no member is pending"
	}
	for _, p := range g.Pending {
		if p.Status.NominatedNodeName != "" {
			return false, 0, fmt.Sprintf("member %s is nominated to %s: preemption is making room", p.Name, p.Status.NominatedNodeName)
		}
	}
	if left := c.LastTransitionTime.Add(after).Sub(now); left > 0 {
		return false, left, "short of capacity for less than the delay"
	}
	return true, 0, ""
}
