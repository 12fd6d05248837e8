package planinput

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/dynamicresources"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/feature"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/names"

	"github.com/phalanx-sched/phalanx/pkg/groups"
	"github.com/phalanx-sched/phalanx/pkg/placement"
	"github.com/phalanx-sched/phalanx/pkg/plugins/pluginrt"
	"github.com/phalanx-sched/phalanx/pkg/plugins/probe"
)

// Constraints turns what the scheduler's Filter plugins would enforce on a
// group's pods into planner input. Constraints among the group's own
// pending members become placement.DomainLimits on member classes, which
// the planner counts as it places; constraints against everything already
// in the cluster come from a probe of the profile's filters, as node
// limits. A nil Constraints plans on resources, selection and taints only.
type Constraints struct {
	// Nodes is the snapshot the plan is made against.
	Nodes []fwk.NodeInfo
	// NamespaceLabels returns a namespace's labels, for terms with a
	// namespaceSelector; nil treats every namespace as unlabelled.
	NamespaceLabels func(ns string) labels.Set
	// Probe runs the profile's filters for a representative pod of a
	// shape; nil skips it (tests, and callers that only need member
	// constraints).
	Probe func(key string, pod *corev1.Pod, crossNode bool, only ...string) (probe.Verdicts, error)
	// Rejected returns what earlier plans of the group learnt the hard way:
	// per node, how many pods of the shape it held when the scheduler's
	// Filter rejected the next one, and why.
	Rejected func(shape string) map[string]Rejection
	// Unknown names the filters the profile runs that Phalanx does not
	// know: every shape is probed for them, unless all of them skip it at
	// PreFilter.
	Unknown []string
	// Blockers, for preemption, says which running pods the preemptor may
	// evict would clear a node the probe refused the pod on (their
	// PodKeys); ok is false when evicting cannot clear it.
	Blockers func(pod *corev1.Pod, node string) (keys []string, ok bool)
	// Evictable, for preemption, says whether the preemptor may evict a
	// running pod. Member limits that count such pods (topology spread)
	// then name them, so the victim search credits their domains.
	Evictable func(pod *corev1.Pod) bool
	// AntiTerms remembers running pods' anti-affinity terms between
	// plans; nil formats them every plan.
	AntiTerms *TermMemo
	// Closed lists nodes a representative pod may not use, with why:
	// nodes held for another gang (reservation.go).
	Closed func(rep *corev1.Pod) map[string]string
	// DRA counts the devices members' ResourceClaims ask for; nil plans
	// without devices.
	DRA *DRA

	devices *deviceState
}

// clearable are the filters whose refusals come from other pods, which
// preemption may evict.
var clearable = map[string]bool{
	names.InterPodAffinity: true, pluginrt.InterPodAffinityName: true, names.NodePorts: true, names.PodTopologySpread: true,
}

// NewProber probes the profile behind h, leaving out the refusals of the
// filters the planner applies itself (node selection, taints, room).
func NewProber(h fwk.Handle) *probe.Prober {
	return probe.New(h, names.NodeUnschedulable, names.NodeName, names.TaintToleration, names.NodeAffinity, names.NodeResourcesFit)
}

// ClusterConstraints is what every plan of a group against infos needs:
// namespace labels for term matching, a probe of the profile's filters
// through pr, and whether the profile runs filters Phalanx does not model.
func ClusterConstraints(ctx context.Context, h fwk.Handle, pr *probe.Prober, infos []fwk.NodeInfo) *Constraints {
	nsLister := h.SharedInformerFactory().Core().V1().Namespaces().Lister()
	return &Constraints{
		Nodes: infos,
		NamespaceLabels: func(ns string) labels.Set {
			n, err := nsLister.Get(ns)
			if err != nil {
				return nil
			}
			return n.Labels
		},
		Probe: func(key string, pod *corev1.Pod, crossNode bool, only ...string) (probe.Verdicts, error) {
			start := time.Now()
			defer func() { probeDuration.Observe(time.Since(start).Seconds()) }()
			return pr.Nodes(ctx, key, pod, infos, crossNode, only...)
		},
		Unknown: UnknownFilters(h),
		DRA:     draOf(h, pr),
	}
}

// draOf is the DRA state plans read through h, nil when the profile
// allocates no devices.
func draOf(h fwk.Handle, pr *probe.Prober) *DRA {
	if pr == nil || pr.Devices == nil {
		return nil
	}
	fts := feature.NewSchedulerFeaturesFromGates(utilfeature.DefaultFeatureGate)
	if !fts.EnableDynamicResourceAllocation {
		return nil
	}
	// The manager is asked for only when a member has claims.
	return &DRA{manager: h.SharedDRAManager, Model: pr.Devices, Features: dynamicresources.AllocatorFeatures(fts)}
}

// Rejection is a planned node the scheduler's Filter refused a member on.
type Rejection struct {
	Cap    int // pods of the shape the node held then
	Reason string
}

// podTerms are the constraints one pod carries, parsed once.
type podTerms struct {
	anti     []term
	affinity []term
	ports    []string
	spread   []spreadTerm
	// probe: something the profile's filters judge against the cluster.
	probe     bool
	crossNode bool
}

type term struct {
	id string
	fwk.AffinityTerm
}

func (c *Constraints) nsLabels(ns string) labels.Set {
	if c == nil || c.NamespaceLabels == nil {
		return nil
	}
	return c.NamespaceLabels(ns)
}

// termsOf parses a pod's constraints. A term the framework cannot parse is
// left to the profile's filters, which reject the pod with the parse error.
func termsOf(pod *corev1.Pod) podTerms {
	var t podTerms
	pi, err := framework.NewPodInfo(pod)
	if err != nil {
		t.probe = true
		return t
	}
	for i, at := range pi.GetRequiredAntiAffinityTerms() {
		t.anti = append(t.anti, term{id: termID(pod, "anti", i), AffinityTerm: at})
	}
	for i, at := range pi.GetRequiredAffinityTerms() {
		t.affinity = append(t.affinity, term{id: termID(pod, "aff", i), AffinityTerm: at})
	}
	for _, at := range append(t.anti, t.affinity...) {
		if at.TopologyKey != corev1.LabelHostname {
			t.crossNode = true
		}
	}
	t.ports = hostPorts(pod)
	for _, c := range pod.Spec.TopologySpreadConstraints {
		if c.WhenUnsatisfiable != corev1.DoNotSchedule {
			continue
		}
		sel, err := spreadSelector(pod, c)
		if err != nil {
			t.probe = true
			continue
		}
		t.spread = append(t.spread, spreadTerm{id: fmt.Sprintf("%s|%s|%s", pod.Namespace, c.TopologyKey, sel), c: c, selector: sel, ns: pod.Namespace})
		t.crossNode = true
	}
	t.probe = t.probe || len(t.anti) > 0 || len(t.affinity) > 0 || len(t.ports) > 0 || len(t.spread) > 0 || needsVolumes(pod)
	return t
}

// termID names a term by its content and the namespace that owns it, so
// members carrying the same term share its classes.
func termID(pod *corev1.Pod, kind string, i int) string {
	var terms []corev1.PodAffinityTerm
	if a := pod.Spec.Affinity; a != nil {
		if kind == "anti" && a.PodAntiAffinity != nil {
			terms = a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution
		}
		if kind == "aff" && a.PodAffinity != nil {
			terms = a.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution
		}
	}
	if i < len(terms) {
		return fmt.Sprintf("%s|%s|%s", kind, pod.Namespace, terms[i].String())
	}
	return fmt.Sprintf("%s|%s|%d", kind, pod.Namespace, i)
}

// hostPorts lists "protocol/port" for every host port the pod takes,
// including the container ports hostNetwork turns into host ports. The
// host IP is ignored: two members asking for one port on different IPs of
// a node are kept apart, which costs a node where the NodePorts filter
// would allow one, and never the other way round.
func hostPorts(pod *corev1.Pod) []string {
	var out []string
	add := func(cs []corev1.Container, sidecarsOnly bool) {
		for _, c := range cs {
			if sidecarsOnly && (c.RestartPolicy == nil || *c.RestartPolicy != corev1.ContainerRestartPolicyAlways) {
				continue
			}
			for _, p := range c.Ports {
				port := p.HostPort
				if port == 0 && pod.Spec.HostNetwork {
					port = p.ContainerPort
				}
				if port <= 0 {
					continue
				}
				proto := p.Protocol
				if proto == "" {
					proto = corev1.ProtocolTCP
				}
				out = append(out, fmt.Sprintf("%s/%d", proto, port))
			}
		}
	}
	add(pod.Spec.Containers, false)
	add(pod.Spec.InitContainers, true)
	return out
}

// needsVolumes says whether the profile's volume filters judge pod. Its
// ResourceClaims are not probed: the planner counts devices per member
// (devices.go), which one probe of one member could not.
func needsVolumes(pod *corev1.Pod) bool {
	for _, v := range pod.Spec.Volumes {
		if v.PersistentVolumeClaim != nil || v.Ephemeral != nil {
			return true
		}
	}
	return false
}

// planTerms is every constraint the pending members of one plan carry.
type planTerms struct {
	anti   []term
	spread []spreadTerm
	ports  map[string]bool
	byPod  map[*corev1.Pod]podTerms
	// existing: running pods whose required anti-affinity a member may
	// match, which only a probe sees.
	existing *existingTerms
}

func (pt *planTerms) add(pod *corev1.Pod) {
	t := termsOf(pod)
	pt.byPod[pod] = t
	for _, a := range t.anti {
		if !hasTerm(pt.anti, a.id) {
			pt.anti = append(pt.anti, a)
		}
	}
	for _, s := range t.spread {
		if !slices.ContainsFunc(pt.spread, func(x spreadTerm) bool { return x.id == s.id }) {
			pt.spread = append(pt.spread, s)
		}
	}
	for _, p := range t.ports {
		pt.ports[p] = true
	}
}

func hasTerm(ts []term, id string) bool {
	return slices.ContainsFunc(ts, func(t term) bool { return t.id == id })
}

// signature is the part of a pod's shape key that member constraints add:
// the classes it belongs to and the constraints it carries. Pods of one
// template share it, so shapes stay few.
func (pt *planTerms) signature(c *Constraints, pod *corev1.Pod) string {
	t := pt.byPod[pod]
	if len(pt.anti) == 0 && len(pt.spread) == 0 && len(pt.ports) == 0 && !t.probe && pt.existing.len() == 0 {
		return ""
	}
	var b strings.Builder
	ns := c.nsLabels(pod.Namespace)
	for i, a := range pt.anti {
		if a.Matches(pod, ns) {
			fmt.Fprintf(&b, "m%d,", i)
		}
		if hasTerm(t.anti, a.id) {
			fmt.Fprintf(&b, "c%d,", i)
		}
	}
	for i, s := range pt.spread {
		if s.ns == pod.Namespace && s.selector.Matches(labels.Set(pod.Labels)) {
			fmt.Fprintf(&b, "s%d,", i)
		}
	}
	for _, i := range pt.existing.matching(pod, ns) {
		fmt.Fprintf(&b, "e%d,", i)
	}
	if t.probe {
		// The profile's verdicts depend on the pod's own constraints.
		a := pod.Spec.Affinity
		if a != nil {
			fmt.Fprintf(&b, "|%v|%v", a.PodAffinity, a.PodAntiAffinity)
		}
		b.WriteByte('|')
		for _, c := range pod.Spec.TopologySpreadConstraints {
			writeSpread(&b, c)
		}
		fmt.Fprintf(&b, "|%v", t.ports)
		for _, v := range pod.Spec.Volumes {
			if v.PersistentVolumeClaim != nil || v.Ephemeral != nil {
				fmt.Fprintf(&b, "|v:%s", v.Name)
			}
		}
	}
	return b.String()
}

// limits fills a shape's classes and member limits from its representative.
func (pt *planTerms) limits(c *Constraints, rep *corev1.Pod, s *placement.Shape) {
	t := pt.byPod[rep]
	ns := c.nsLabels(rep.Namespace)
	for _, a := range pt.anti {
		carries := hasTerm(t.anti, a.id)
		matches := a.Matches(rep, ns)
		reason := fmt.Sprintf("pod anti-affinity among members: at most one per %s", a.TopologyKey)
		if carries {
			s.Classes = append(s.Classes, "carries:"+a.id)
			s.Limits = append(s.Limits, placement.DomainLimit{Key: a.TopologyKey, Class: "matches:" + a.id, Max: 1, Reason: reason})
		}
		if matches {
			s.Classes = append(s.Classes, "matches:"+a.id)
			s.Limits = append(s.Limits, placement.DomainLimit{Key: a.TopologyKey, Class: "carries:" + a.id, Max: 1, Reason: reason})
		}
	}
	for _, p := range t.ports {
		class := "port:" + p
		if !slices.Contains(s.Classes, class) {
			s.Classes = append(s.Classes, class)
			s.Limits = append(s.Limits, placement.DomainLimit{Class: class, Max: 1, Reason: fmt.Sprintf("host port %s: one member per node", p)})
		}
	}
	for _, sp := range pt.spread {
		if sp.ns == rep.Namespace && sp.selector.Matches(labels.Set(rep.Labels)) {
			s.Classes = append(s.Classes, "spread:"+sp.id)
		}
	}
	for _, sp := range t.spread {
		s.Limits = append(s.Limits, c.spreadLimit(rep, sp, slices.Contains(s.Classes, "spread:"+sp.id)))
	}
}

// constrain completes shape s of representative rep: member classes and
// limits, the probe's verdicts on the rest of the cluster, and the nodes
// earlier plans were refused on.
func (c *Constraints) constrain(root, t *groups.Tree, pt *planTerms, key string, rep *corev1.Pod, s *placement.Shape) error {
	pt.limits(c, rep, s)
	terms := pt.byPod[rep]
	needProbe, cross := terms.probe, terms.crossNode
	ns := c.nsLabels(rep.Namespace)
	for _, i := range pt.existing.matching(rep, ns) {
		needProbe = true
		cross = cross || pt.existing.list[i].TopologyKey != corev1.LabelHostname
	}
	var only []string
	if !needProbe && len(c.Unknown) > 0 {
		needProbe, only = true, c.Unknown
	}
	var notes []string
	if needProbe && c.Probe != nil {
		v, err := c.Probe(t.Key.String()+"#"+key, rep, cross, only...)
		if err != nil {
			return err
		}
		if len(v) > 0 {
			s.NodeLimit = make(map[string]int, len(v))
			for n, verdict := range v {
				if c.Blockers != nil && clearable[verdict.Plugin] {
					if keys, ok := c.Blockers(rep, n); ok {
						if s.BlockedBy == nil {
							s.BlockedBy = map[string][]string{}
						}
						s.BlockedBy[n] = keys
						continue
					}
				}
				s.NodeLimit[n] = 0
			}
			notes = append(notes, v.Summary())
		}
	}
	if c.Rejected != nil {
		for n, r := range c.Rejected(key) {
			if s.NodeLimit == nil {
				s.NodeLimit = map[string]int{}
			}
			if old, ok := s.NodeLimit[n]; !ok || r.Cap < old {
				s.NodeLimit[n] = r.Cap
			}
			notes = append(notes, fmt.Sprintf("node %s refused a planned member (%s)", n, r.Reason))
		}
	}
	if c.Closed != nil {
		closed := c.Closed(rep)
		why := ""
		for n, w := range closed {
			if s.NodeLimit == nil {
				s.NodeLimit = map[string]int{}
			}
			s.NodeLimit[n] = 0
			why = w
		}
		if len(closed) > 0 {
			notes = append(notes, fmt.Sprintf("%d nodes held for other gangs (%s)", len(closed), why))
		}
	}
	pending := 0
	for _, m := range t.Members {
		if m.State == groups.Pending {
			pending++
		}
	}
	note, err := c.constrainDevices(context.Background(), root, t, key, rep, pending, s)
	if err != nil {
		return err
	}
	if note != "" {
		notes = append(notes, note)
	}
	s.Excluded = strings.Join(notes, "; ")
	return nil
}

// selfAffinityKey is the topology key of a required pod affinity term the
// pod matches itself: its members must share one domain of that key, which
// is what a group topology constraint plans for.
func selfAffinityKey(pt *planTerms, pod *corev1.Pod, c *Constraints) string {
	ns := c.nsLabels(pod.Namespace)
	for _, a := range pt.byPod[pod].affinity {
		if a.Matches(pod, ns) {
			return a.TopologyKey
		}
	}
	return ""
}

// ViewProber keeps the prober of the framework a diagnostic view probes
// through (pluginrt.View): the probes' cache lives as long as that
// framework, which the diagnostics keep for the scheduler's lifetime.
type ViewProber struct {
	mu sync.Mutex
	h  fwk.Handle
	pr *probe.Prober
}

// For returns the prober of h, built on the first call for h.
func (v *ViewProber) For(h fwk.Handle) *probe.Prober {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.h != h {
		v.h, v.pr = h, NewProber(h)
	}
	return v.pr
}
