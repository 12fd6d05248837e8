package sim

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	xv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	v1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
	"github.com/phalanx-sched/phalanx/pkg/groups"
)

// GroupKind says what a snapshot row is.
type GroupKind string

const (
	KindPodGroup  GroupKind = "PodGroup"
	KindComposite GroupKind = "CompositePodGroup"
	// KindLabelGang is an implicit gang of the
	// pod-group.scheduling.sigs.k8s.io label pair.
	KindLabelGang GroupKind = "label gang"
	// KindPods are plain pods: a PodSet, a Job's pods before they join a
	// group, or pods whose names differ only in a trailing number.
	KindPods GroupKind = "pods"
)

// Snapshot is the state of a scenario's namespace after a step.
type Snapshot struct {
	// Groups in tree order: each CompositePodGroup is followed by its
	// children (Depth one more than its own).
	Groups []GroupState
	// Nodes in natural name order.
	Nodes []NodeState

	// nodeLabels are every node's labels, for sameDomain checks.
	nodeLabels map[string]map[string]string
}

// GroupState is one group's pods at a snapshot.
type GroupState struct {
	Name   string
	Kind   GroupKind
	Parent string
	Depth  int
	// Policy says in words how the group is scheduled.
	Policy string
	// TopologyKey is the group's constraint, if any.
	TopologyKey string
	// PreferredKeys are the group's preferred levels, narrowest first.
	PreferredKeys []string
	// Choice is the scheduler's PreferredTopology condition message: where
	// its last plan put a group with preferred levels, and why.
	Choice string
	// Reservation is the scheduler's Reserved condition on the group, as
	// "<reason>: <message>": the domain held for a gang that waited, or
	// why a hold ended or was refused.
	Reservation string
	// Bound and Pending count pods that are not terminating; a composite
	// counts every pod below it. Bound pods hold their node; Done pods
	// ran there and finished (Succeeded or Failed), so they hold nothing.
	// Evicted counts pods marked with a DisruptionTarget condition since
	// the scenario began.
	Bound, Pending, Done, Evicted int
	// Domains are the values of TopologyKey (or, without one, of the rack
	// label) over the nodes of the bound pods.
	Domains []string
	// Nodes is how many nodes the bound pods use.
	Nodes int
	// Leaf groups have pods of their own and a colour in the picture.
	Leaf bool

	// Ring says how often the ring of the bound pods, in rank order,
	// crosses each level's boundaries; "" for fewer than 2 pods or pods
	// that have neither a rank nor an ordinal.
	Ring string

	// nodeNames are the nodes of the bound pods, sorted.
	nodeNames []string
	// ring lists the nodes of the bound pods in rank order.
	ring []string
}

// Where says in words where the group's bound pods run.
func (g GroupState) Where() string {
	if g.Bound == 0 {
		return "-"
	}
	if len(g.PreferredKeys) > 0 {
		return keyName(g.PreferredKeys[0]) + " " + strings.Join(g.Domains, ", ")
	}
	if g.TopologyKey != "" {
		return keyName(g.TopologyKey) + " " + strings.Join(g.Domains, ", ")
	}
	s := plural(g.Nodes, "node")
	if len(g.Domains) > 0 {
		s += " in " + plural(len(g.Domains), "rack")
	}
	return s
}

// NodeState is one node and whose pods run on it.
type NodeState struct {
	Name, Zone, Rack string
	// Slots list the groups with bound pods here, largest share first.
	Slots []NodeSlot
}

// NodeSlot is one group's pods on a node.
type NodeSlot struct {
	Group string
	Pods  int
	// Share is the fraction of the node the pods request, by their dominant
	// resource (cpu, memory or GPUs).
	Share float64
}

// groupRef identifies a snapshot row.
type groupRef struct {
	kind GroupKind
	name string
}

var ordinalSuffix = regexp.MustCompile(`-[0-9]+$`)

// groupOf says which row a pod belongs to.
func groupOf(pod *corev1.Pod) groupRef {
	if a, ok, err := groups.Attach(pod); ok && err == nil {
		if a.Key.Kind == groups.LabelKind {
			return groupRef{KindLabelGang, a.Key.Name}
		}
		return groupRef{KindPodGroup, a.Key.Name}
	}
	if set := pod.Labels[PodSetLabel]; set != "" {
		return groupRef{KindPods, set}
	}
	if job := pod.Labels[batchv1.JobNameLabel]; job != "" {
		return groupRef{KindPods, job}
	}
	return groupRef{KindPods, ordinalSuffix.ReplaceAllString(pod.Name, "")}
}

// observation is what one poll of the namespace saw.
type observation struct {
	pods       []corev1.Pod
	podGroups  map[string]*v1alpha1.PodGroup
	composites map[string]*v1alpha1.CompositePodGroup
	// xPodGroups are scheduler-plugins' PodGroups; a row of that name
	// that is no Phalanx PodGroup is one of them.
	xPodGroups map[string]*xv1alpha1.PodGroup
	nodes      []corev1.Node
}

// observe lists the namespace's pods and groups, and the nodes if asked.
func (r *runner) observe(ctx context.Context, withNodes bool) (*observation, error) {
	o := &observation{podGroups: map[string]*v1alpha1.PodGroup{}, composites: map[string]*v1alpha1.CompositePodGroup{}, xPodGroups: map[string]*xv1alpha1.PodGroup{}}
	pods, err := r.cl.Client.CoreV1().Pods(r.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list pods: %w", err)
	}
	o.pods = pods.Items
	pgs, err := r.cl.Phalanx.SchedulingV1alpha1().PodGroups(r.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list PodGroups: %w", err)
	}
	for i := range pgs.Items {
		o.podGroups[pgs.Items[i].Name] = &pgs.Items[i]
	}
	cpgs, err := r.cl.Phalanx.SchedulingV1alpha1().CompositePodGroups(r.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list CompositePodGroups: %w", err)
	}
	for i := range cpgs.Items {
		o.composites[cpgs.Items[i].Name] = &cpgs.Items[i]
	}
	o.addUpstreamGroups(ctx, r)
	if r.cl.SchedulerPlugins != nil {
		xpgs, err := r.cl.SchedulerPlugins.SchedulingV1alpha1().PodGroups(r.ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, fmt.Errorf("list PodGroups.scheduling.x-k8s.io: %w", err)
		}
		for i := range xpgs.Items {
			o.xPodGroups[xpgs.Items[i].Name] = &xpgs.Items[i]
		}
	}
	if withNodes {
		nodes, err := r.cl.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, fmt.Errorf("list nodes: %w", err)
		}
		o.nodes = nodes.Items
	}
	return o, nil
}

// addUpstreamGroups adds upstream's scheduling.k8s.io groups, where the API
// server serves them, as rows like Phalanx's own: Phalanx's API mirrors
// their field names, so a JSON round trip reads them. A Phalanx group of
// the same name keeps its row.
func (o *observation) addUpstreamGroups(ctx context.Context, r *runner) {
	if pgs, err := r.cl.Client.SchedulingV1beta1().PodGroups(r.ns).List(ctx, metav1.ListOptions{}); err == nil {
		for i := range pgs.Items {
			var pg v1alpha1.PodGroup
			if _, dup := o.podGroups[pgs.Items[i].Name]; !dup && mirror(&pgs.Items[i], &pg) == nil {
				o.podGroups[pg.Name] = &pg
			}
		}
	}
	if cpgs, err := r.cl.Client.SchedulingV1alpha3().CompositePodGroups(r.ns).List(ctx, metav1.ListOptions{}); err == nil {
		for i := range cpgs.Items {
			var cpg v1alpha1.CompositePodGroup
			if _, dup := o.composites[cpgs.Items[i].Name]; !dup && mirror(&cpgs.Items[i], &cpg) == nil {
				o.composites[cpg.Name] = &cpg
			}
		}
	}
}

func mirror(from, to any) error {
	data, err := json.Marshal(from)
	if err != nil {
		return err
	}
	return json.Unmarshal(data, to)
}

// parent is the CompositePodGroup a group object names, if any.
func (o *observation) parent(ref groupRef) (groupRef, bool) {
	var name *string
	switch ref.kind {
	case KindPodGroup:
		if pg := o.podGroups[ref.name]; pg != nil {
			name = pg.Spec.ParentCompositePodGroupName
		} else if xpg := o.xPodGroups[ref.name]; xpg != nil && xpg.Annotations[groups.XParentAnnotation] != "" {
			parent := xpg.Annotations[groups.XParentAnnotation]
			name = &parent
		}
	case KindComposite:
		if cpg := o.composites[ref.name]; cpg != nil {
			name = cpg.Spec.ParentCompositePodGroupName
		}
	}
	if name == nil || *name == "" {
		return groupRef{}, false
	}
	return groupRef{KindComposite, *name}, true
}

// within reports whether ref is the group called name or lies below a
// CompositePodGroup of that name.
func (o *observation) within(ref groupRef, name string) bool {
	for depth := 0; depth <= v1alpha1.MaxTreeDepth; depth++ {
		if ref.name == name {
			return true
		}
		var ok bool
		if ref, ok = o.parent(ref); !ok {
			return false
		}
	}
	return false
}

// selectPods returns the pods, not terminating, of a group (and the groups
// below it) or with a name prefix.
func (o *observation) selectPods(group, prefix string) []*corev1.Pod {
	var out []*corev1.Pod
	for i := range o.pods {
		p := &o.pods[i]
		if p.DeletionTimestamp != nil {
			continue
		}
		if (prefix != "" && strings.HasPrefix(p.Name, prefix)) || (group != "" && o.within(groupOf(p), group)) {
			out = append(out, p)
		}
	}
	return out
}

// settling is true while the scheduler is visibly in the middle of
// something: a pending pod it has not reported on yet; a gang with some
// pods bound, fewer than its minimum, and enough pending ones to reach it
// (the moment between its first and last bind); or a pod terminating or
// marked for eviction and not yet gone.
func (o *observation) settling() bool {
	type counts struct{ bound, pending, min int }
	gangs := map[groupRef]*counts{}
	for i := range o.pods {
		p := &o.pods[i]
		if p.DeletionTimestamp != nil || isVictim(p) || awaitsVerdict(p) {
			return true
		}
		ref := groupOf(p)
		c := gangs[ref]
		if c == nil {
			c = &counts{}
			switch ref.kind {
			case KindPodGroup:
				if pg := o.podGroups[ref.name]; pg != nil && pg.Spec.SchedulingPolicy.Gang != nil {
					c.min = int(pg.Spec.SchedulingPolicy.Gang.MinCount)
				} else if xpg := o.xPodGroups[ref.name]; pg == nil && xpg != nil {
					c.min = int(xpg.Spec.MinMember)
				}
			case KindLabelGang:
				if a, ok, err := groups.Attach(p); ok && err == nil {
					c.min = a.MinAvailable
				}
			}
			gangs[ref] = c
		}
		if p.Spec.NodeName != "" {
			c.bound++
		} else {
			c.pending++
		}
	}
	for _, c := range gangs {
		if c.bound > 0 && c.bound < c.min && c.bound+c.pending >= c.min {
			return true
		}
	}
	return false
}

// awaitsVerdict is a pending pod, not held by a scheduling gate, that has
// no PodScheduled condition yet: the scheduler has not tried it.
func awaitsVerdict(p *corev1.Pod) bool {
	if p.Spec.NodeName != "" || len(p.Spec.SchedulingGates) > 0 {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled {
			return false
		}
	}
	return true
}

// groupOrder gives rows a stable order across a scenario's snapshots: the
// order in which they were first seen.
type groupOrder map[groupRef]int

func (g groupOrder) rank(ref groupRef) int {
	if r, ok := g[ref]; ok {
		return r
	}
	g[ref] = len(g)
	return g[ref]
}

// rowBuilder accumulates one row.
type rowBuilder struct {
	state   GroupState
	ref     groupRef
	parent  groupRef
	hasPar  bool
	created time.Time
	nodes   sets.Set[string]
	minAvl  string
	class   string
	members []ringMember // bound pods, for the ring (ring.go)
}

// buildSnapshot turns an observation into rows and node states. evicted
// counts DisruptionTarget pods per group; priorities are the values of the
// scenario's PriorityClasses, for the policy column.
func buildSnapshot(o *observation, evicted map[groupRef]int, priorities map[string]int32, order groupOrder) Snapshot {
	rows := map[groupRef]*rowBuilder{}
	row := func(ref groupRef) *rowBuilder {
		if b, ok := rows[ref]; ok {
			return b
		}
		b := &rowBuilder{ref: ref, nodes: sets.New[string](), state: GroupState{Name: ref.name, Kind: ref.kind}}
		rows[ref] = b
		return b
	}
	nodeLabels := map[string]map[string]string{}
	allocatable := map[string]corev1.ResourceList{}
	for _, n := range o.nodes {
		nodeLabels[n.Name] = n.Labels
		allocatable[n.Name] = n.Status.Allocatable
	}

	type slotKey struct{ node, group string }
	slots := map[slotKey]*NodeSlot{}
	for i := range o.pods {
		p := &o.pods[i]
		if p.DeletionTimestamp != nil {
			continue
		}
		ref := groupOf(p)
		b := row(ref)
		b.state.Leaf = true
		if b.created.IsZero() || p.CreationTimestamp.Before(&metav1.Time{Time: b.created}) {
			b.created = p.CreationTimestamp.Time
		}
		if b.minAvl == "" {
			b.minAvl = p.Labels[v1alpha1.LightweightMinAvailableLabel]
		}
		if b.class == "" {
			b.class = p.Spec.PriorityClassName
		}
		if p.Spec.NodeName == "" {
			b.state.Pending++
			continue
		}
		if finished(p) {
			b.state.Done++
			continue
		}
		b.state.Bound++
		b.members = append(b.members, memberOf(p))
		b.nodes.Insert(p.Spec.NodeName)
		k := slotKey{p.Spec.NodeName, ref.name}
		s := slots[k]
		if s == nil {
			s = &NodeSlot{Group: ref.name}
			slots[k] = s
		}
		s.Pods++
		s.Share += dominantShare(p, allocatable[p.Spec.NodeName])
	}
	for ref, n := range evicted {
		b := row(ref)
		b.state.Leaf = true
		b.state.Evicted = n
	}
	for name := range o.podGroups {
		row(groupRef{KindPodGroup, name})
	}
	for name := range o.xPodGroups {
		row(groupRef{KindPodGroup, name})
	}
	for name := range o.composites {
		row(groupRef{KindComposite, name})
	}
	// Parents named by groups but missing still get a row, so the tree
	// shows what is wrong.
	for ref := range rows {
		if par, ok := o.parent(ref); ok {
			row(par)
		}
	}

	for ref, b := range rows {
		b.state.ring, b.state.Ring = ringOf(b.members, nodeLabels)
		b.parent, b.hasPar = o.parent(ref)
		if b.hasPar {
			b.state.Parent = b.parent.name
		}
		describe(b, o, priorities)
	}

	// Composites sum their children, bottom-up.
	children := map[groupRef][]*rowBuilder{}
	var roots []*rowBuilder
	for _, b := range rows {
		if b.hasPar && rows[b.parent] != nil && b.parent != b.ref {
			children[b.parent] = append(children[b.parent], b)
		} else {
			roots = append(roots, b)
		}
	}
	byOrder := func(list []*rowBuilder) {
		sort.Slice(list, func(i, j int) bool {
			if !list[i].created.Equal(list[j].created) {
				return list[i].created.Before(list[j].created)
			}
			return list[i].ref.name < list[j].ref.name
		})
		for _, b := range list {
			order.rank(b.ref)
		}
		sort.SliceStable(list, func(i, j int) bool { return order[list[i].ref] < order[list[j].ref] })
	}
	var total func(b *rowBuilder, depth int, seen sets.Set[groupRef])
	total = func(b *rowBuilder, depth int, seen sets.Set[groupRef]) {
		seen.Insert(b.ref)
		for _, c := range children[b.ref] {
			if seen.Has(c.ref) || depth > v1alpha1.MaxTreeDepth {
				continue
			}
			total(c, depth+1, seen)
			b.state.Bound += c.state.Bound
			b.state.Pending += c.state.Pending
			b.state.Done += c.state.Done
			b.state.Evicted += c.state.Evicted
			b.nodes = b.nodes.Union(c.nodes)
		}
		key := b.state.TopologyKey
		if len(b.state.PreferredKeys) > 0 {
			key = b.state.PreferredKeys[0]
		}
		if key == "" {
			key = RackLabel
		}
		domains := sets.New[string]()
		for n := range b.nodes {
			if v, ok := nodeLabels[n][key]; ok {
				domains.Insert(v)
			} else if b.state.TopologyKey != "" {
				domains.Insert("(no " + keyName(key) + " label on " + n + ")")
			}
		}
		b.state.Domains = sortedNatural(sets.List(domains))
		b.state.Nodes = b.nodes.Len()
		b.state.nodeNames = sortedNatural(sets.List(b.nodes))
	}
	for _, b := range roots {
		total(b, 1, sets.New[groupRef]())
	}

	snap := Snapshot{nodeLabels: nodeLabels}
	var emit func(list []*rowBuilder, depth int, seen sets.Set[groupRef])
	emit = func(list []*rowBuilder, depth int, seen sets.Set[groupRef]) {
		byOrder(list)
		for _, b := range list {
			if seen.Has(b.ref) {
				continue
			}
			seen.Insert(b.ref)
			b.state.Depth = depth
			snap.Groups = append(snap.Groups, b.state)
			emit(children[b.ref], depth+1, seen)
		}
	}
	seen := sets.New[groupRef]()
	emit(roots, 0, seen)
	// Groups in a parent cycle have no root; show them at the top level.
	var orphans []*rowBuilder
	for ref, b := range rows {
		if !seen.Has(ref) {
			orphans = append(orphans, b)
		}
	}
	emit(orphans, 0, seen)

	for _, n := range o.nodes {
		ns := NodeState{Name: n.Name, Zone: n.Labels[ZoneLabel], Rack: n.Labels[RackLabel]}
		for k, s := range slots {
			if k.node == n.Name {
				ns.Slots = append(ns.Slots, *s)
			}
		}
		sort.Slice(ns.Slots, func(i, j int) bool {
			if ns.Slots[i].Share != ns.Slots[j].Share {
				return ns.Slots[i].Share > ns.Slots[j].Share
			}
			return ns.Slots[i].Group < ns.Slots[j].Group
		})
		snap.Nodes = append(snap.Nodes, ns)
	}
	sort.Slice(snap.Nodes, func(i, j int) bool { return naturalLess(snap.Nodes[i].Name, snap.Nodes[j].Name) })
	return snap
}

// describe fills a row's policy, constraint and creation time from its object.
func describe(b *rowBuilder, o *observation, priorities map[string]int32) {
	var parts []string
	switch b.ref.kind {
	case KindPodGroup:
		pg := o.podGroups[b.ref.name]
		if xpg := o.xPodGroups[b.ref.name]; pg == nil && xpg != nil {
			b.created = xpg.CreationTimestamp.Time
			parts = append(parts, fmt.Sprintf("gang min %d (scheduling.x-k8s.io)", xpg.Spec.MinMember))
			if key := xpg.Annotations[groups.XTopologyKeyAnnotation]; key != "" {
				b.state.TopologyKey = key
				parts = append(parts, "one "+keyName(key))
			}
			if len(xpg.Spec.MinResources) > 0 {
				parts = append(parts, "minResources")
			}
			parts = append(parts, priorityText(b.class, nil, priorities)...)
			break
		}
		if pg == nil {
			b.state.Policy = "PodGroup not found"
			return
		}
		b.created = pg.CreationTimestamp.Time
		if g := pg.Spec.SchedulingPolicy.Gang; g != nil {
			parts = append(parts, fmt.Sprintf("gang min %d", g.MinCount))
		} else {
			parts = append(parts, "basic (best effort)")
		}
		if c := pg.Spec.SchedulingConstraints; c != nil {
			for _, p := range c.PreferredTopology {
				b.state.PreferredKeys = append(b.state.PreferredKeys, p.Key)
			}
			if p := preferredText(b.state.PreferredKeys); p != "" {
				parts = append(parts, p)
			}
			if len(c.Topology) > 0 {
				b.state.TopologyKey = c.Topology[0].Key
				parts = append(parts, "one "+keyName(b.state.TopologyKey))
			}
		}
		if c := meta.FindStatusCondition(pg.Status.Conditions, v1alpha1.PodGroupPreferredTopology); c != nil {
			b.state.Choice = c.Message
		}
		if c := meta.FindStatusCondition(pg.Status.Conditions, reservedCondition); c != nil {
			b.state.Reservation = c.Reason
			if c.Message != "" {
				b.state.Reservation += ": " + c.Message
			}
		}
		if d := pg.Spec.DisruptionMode; d != nil && d.All != nil {
			parts = append(parts, "evicted whole")
		}
		parts = append(parts, priorityText(pg.Spec.PriorityClassName, pg.Spec.Priority, priorities)...)
	case KindComposite:
		cpg := o.composites[b.ref.name]
		if cpg == nil {
			b.state.Policy = "CompositePodGroup not found"
			return
		}
		b.created = cpg.CreationTimestamp.Time
		if g := cpg.Spec.SchedulingPolicy.Gang; g != nil {
			parts = append(parts, fmt.Sprintf("composite, gang min %d groups", g.MinGroupCount))
		} else {
			parts = append(parts, "composite, basic")
		}
		if c := cpg.Spec.SchedulingConstraints; c != nil && len(c.Topology) > 0 {
			b.state.TopologyKey = c.Topology[0].Key
			parts = append(parts, "one "+keyName(b.state.TopologyKey))
		}
		if d := cpg.Spec.DisruptionMode; d != nil && d.All != nil {
			parts = append(parts, "evicted whole")
		}
		parts = append(parts, priorityText(cpg.Spec.PriorityClassName, cpg.Spec.Priority, priorities)...)
	case KindLabelGang:
		if b.minAvl != "" {
			parts = append(parts, fmt.Sprintf("gang min %s (label pair)", b.minAvl))
		} else {
			parts = append(parts, "gang (label pair)")
		}
		parts = append(parts, priorityText(b.class, nil, priorities)...)
	default:
		parts = append(parts, "plain pods")
		parts = append(parts, priorityText(b.class, nil, priorities)...)
	}
	b.state.Policy = strings.Join(parts, ", ")
}

func priorityText(class string, value *int32, priorities map[string]int32) []string {
	switch {
	case value != nil:
		return []string{fmt.Sprintf("priority %d", *value)}
	case class == "":
		return nil
	}
	if v, ok := priorities[class]; ok {
		return []string{fmt.Sprintf("priority %s (%d)", class, v)}
	}
	return []string{"priority " + class}
}

// keyName is the short name of a topology key.
func keyName(key string) string {
	for short, full := range map[string]string{"zone": ZoneLabel, "block": BlockLabel, "rack": RackLabel, "node": HostnameLabel} {
		if key == full {
			return short
		}
	}
	return key
}

// dominantShare is the largest fraction of the node's cpu, memory or GPUs
// the pod requests.
func dominantShare(p *corev1.Pod, alloc corev1.ResourceList) float64 {
	share := 0.0
	for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory, GPUResource} {
		have, ok := alloc[name]
		if !ok || have.IsZero() {
			continue
		}
		var want int64
		for _, c := range p.Spec.Containers {
			if q, ok := c.Resources.Requests[name]; ok {
				want += q.MilliValue()
			}
		}
		if s := float64(want) / float64(have.MilliValue()); s > share {
			share = s
		}
	}
	return share
}

func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

var digits = regexp.MustCompile(`[0-9]+|[^0-9]+`)

// naturalLess orders node-2 before node-10.
func naturalLess(a, b string) bool {
	pa, pb := digits.FindAllString(a, -1), digits.FindAllString(b, -1)
	for i := 0; i < len(pa) && i < len(pb); i++ {
		if pa[i] == pb[i] {
			continue
		}
		na, ea := parseUint(pa[i])
		nb, eb := parseUint(pb[i])
		if ea && eb && na != nb {
			return na < nb
		}
		return pa[i] < pb[i]
	}
	return len(pa) < len(pb)
}

func parseUint(s string) (uint64, bool) {
	var n uint64
	for _, c := range s {
		if c < '0' || c > '9' || n > 1e17 {
			return 0, false
		}
		n = n*10 + uint64(c-'0')
	}
	return n, s != ""
}

func sortedNatural(in []string) []string {
	sort.Slice(in, func(i, j int) bool { return naturalLess(in[i], in[j]) })
	return in
}
