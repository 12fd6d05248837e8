package report

import (
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// maxProblems bounds how many problems a Verdict spells out.
const maxProblems = 10

// Group is a gang of the case as the harness defined it, independent of
// how the arm under test represents it.
type Group struct {
	Name     string
	Members  []string
	MinCount int
	// TopologyKey, when set, is a node label whose value every bound member
	// must share.
	TopologyKey string
	// OnePerValueKey, when set, is a node label no two bound members may
	// share a value of: the members' required anti-affinity among
	// themselves (kubernetes.io/hostname: one member per node).
	OnePerValueKey string
}

// Verdict is the placement check at the end of a run.
type Verdict struct {
	Pods  int `json:"pods"`
	Bound int `json:"bound"`
	// Groups with every member bound, none bound, or some but fewer than
	// minCount bound.
	Groups         int `json:"groups"`
	CompleteGroups int `json:"completeGroups"`
	EmptyGroups    int `json:"emptyGroups"`
	PartialGroups  int `json:"partialGroups"`
	// TopologyViolations counts constrained groups spread over more than
	// one domain (or bound to nodes without the label).
	TopologyViolations int `json:"topologyViolations"`
	// AntiAffinityViolations counts groups with two or more bound members
	// on one value of their OnePerValueKey (or on a node without it).
	AntiAffinityViolations int `json:"antiAffinityViolations,omitempty"`
	// OvercommittedNodes counts nodes whose bound pods request more cpu,
	// memory or pods than the node has allocatable.
	OvercommittedNodes int `json:"overcommittedNodes"`
	// UnknownNodes counts pods bound to a node that does not exist.
	UnknownNodes int `json:"unknownNodes"`
	// DeviceViolations counts bound pods whose DRA claims are not
	// allocated on their node and reserved for them, and devices allocated
	// twice (CheckDevices; DRA cases only).
	DeviceViolations int `json:"deviceViolations,omitempty"`
	// Problems names the first few violations.
	Problems []string `json:"problems,omitempty"`
}

// OK is true when no gang is partially bound, no topology or
// anti-affinity constraint is violated, no node is overcommitted and no
// device misallocated. It does not require every pod to
// be bound; compare Bound with Pods for that.
func (v Verdict) OK() bool {
	return v.PartialGroups == 0 && v.TopologyViolations == 0 && v.AntiAffinityViolations == 0 &&
		v.OvercommittedNodes == 0 && v.UnknownNodes == 0 && v.DeviceViolations == 0
}

func (v *Verdict) problem(format string, args ...interface{}) {
	if len(v.Problems) < maxProblems {
		v.Problems = append(v.Problems, fmt.Sprintf(format, args...))
	}
}

// Check judges the final placement: pods (with spec.nodeName for bound
// ones) on nodes, against the case's groups. Pods not named by any group
// are plain pods and only count toward capacity.
func Check(groups []Group, nodes []*corev1.Node, pods []*corev1.Pod) Verdict {
	return CheckWithDevices(groups, nodes, pods, nil)
}

// DeviceBackedResources are the extended resource names DRA serves with
// devices of classes: each class's explicit extendedResourceName and its
// implicit deviceclass.resource.kubernetes.io/<class> name.
func DeviceBackedResources(classes []*resourceapi.DeviceClass) map[corev1.ResourceName]bool {
	out := map[corev1.ResourceName]bool{}
	for _, c := range classes {
		out[corev1.ResourceName(resourceapi.ResourceDeviceClassPrefix+c.Name)] = true
		if c.Spec.ExtendedResourceName != nil {
			out[corev1.ResourceName(*c.Spec.ExtendedResourceName)] = true
		}
	}
	return out
}

// CheckWithDevices is Check on a cluster where the extended resources in
// deviceBacked are served by DRA devices on nodes that do not advertise
// them: there a pod's request for one is allocated as a claim, which
// CheckDevices judges, and it is not counted against the node.
func CheckWithDevices(groups []Group, nodes []*corev1.Node, pods []*corev1.Pod, deviceBacked map[corev1.ResourceName]bool) Verdict {
	v := Verdict{Pods: len(pods), Groups: len(groups)}
	byName := make(map[string]*corev1.Pod, len(pods))
	for _, p := range pods {
		byName[p.Name] = p
		if p.Spec.NodeName != "" {
			v.Bound++
		}
	}
	nodeByName := make(map[string]*corev1.Node, len(nodes))
	for _, n := range nodes {
		nodeByName[n.Name] = n
	}

	for _, g := range groups {
		bound := 0
		domains := map[string]int{}
		spread := map[string]int{}
		for _, m := range g.Members {
			p := byName[m]
			if p == nil || p.Spec.NodeName == "" {
				continue
			}
			bound++
			if g.TopologyKey != "" {
				domains[labelOf(nodeByName[p.Spec.NodeName], g.TopologyKey)]++
			}
			if g.OnePerValueKey != "" {
				spread[labelOf(nodeByName[p.Spec.NodeName], g.OnePerValueKey)]++
			}
		}
		var shared []string
		for value, n := range spread {
			// Every bench node carries the key; a member on a node without
			// it cannot be confirmed alone there, so it is reported, as a
			// topology-constrained member on such a node is.
			if n > 1 || value == noLabel(g.OnePerValueKey) {
				shared = append(shared, fmt.Sprintf("%s=%d", value, n))
			}
		}
		if len(shared) > 0 {
			sort.Strings(shared)
			v.AntiAffinityViolations++
			v.problem("group %s: anti-affinity on %s broken, members share: %s", g.Name, g.OnePerValueKey, strings.Join(shared, ", "))
		}
		switch {
		case bound == 0:
			v.EmptyGroups++
		case bound >= g.MinCount:
			v.CompleteGroups++
		default:
			v.PartialGroups++
			v.problem("group %s: %d of %d members bound, below minCount %d", g.Name, bound, len(g.Members), g.MinCount)
		}
		if len(domains) > 1 {
			v.TopologyViolations++
			v.problem("group %s: members spread over %d values of %s: %s", g.Name, len(domains), g.TopologyKey, formatCounts(domains))
		} else {
			for value := range domains {
				if value == noLabel(g.TopologyKey) {
					v.TopologyViolations++
					v.problem("group %s: bound to nodes without label %s", g.Name, g.TopologyKey)
				}
			}
		}
	}

	used := map[string]corev1.ResourceList{}
	count := map[string]int64{}
	for _, p := range pods {
		if p.Spec.NodeName == "" {
			continue
		}
		if nodeByName[p.Spec.NodeName] == nil {
			v.UnknownNodes++
			v.problem("pod %s bound to unknown node %s", p.Name, p.Spec.NodeName)
			continue
		}
		sum := used[p.Spec.NodeName]
		if sum == nil {
			sum = corev1.ResourceList{}
			used[p.Spec.NodeName] = sum
		}
		for _, c := range p.Spec.Containers {
			for name, q := range c.Resources.Requests {
				acc := sum[name]
				acc.Add(q)
				sum[name] = acc
			}
		}
		count[p.Spec.NodeName]++
	}
	names := make([]string, 0, len(used))
	for name := range used {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		alloc := nodeByName[name].Status.Allocatable
		var over []string
		for res, q := range used[name] {
			a, ok := alloc[res]
			if !ok && deviceBacked[res] {
				continue
			}
			if !ok || q.Cmp(a) > 0 {
				over = append(over, fmt.Sprintf("%s %s > %s", res, q.String(), a.String()))
			}
		}
		if a, ok := alloc[corev1.ResourcePods]; ok && resource.NewQuantity(count[name], resource.DecimalSI).Cmp(a) > 0 {
			over = append(over, fmt.Sprintf("pods %d > %s", count[name], a.String()))
		}
		if len(over) > 0 {
			sort.Strings(over)
			v.OvercommittedNodes++
			v.problem("node %s overcommitted: %v", name, over)
		}
	}
	return v
}

// labelOf is the node's value of key, or noLabel(key) when the node does
// not exist or lacks the label.
func labelOf(n *corev1.Node, key string) string {
	if n != nil {
		if value, ok := n.Labels[key]; ok {
			return value
		}
	}
	return noLabel(key)
}

func noLabel(key string) string { return "<no " + key + " label>" }

func formatCounts(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := ""
	for i, k := range keys {
		if i > 0 {
			out += ", "
		}
		out += fmt.Sprintf("%s=%d", k, m[k])
	}
	return out
}

// CheckDevices adds the DRA part of the placement check to v, from the
// API's pods, claims and slices: every bound pod's claims (named in its
// status) are allocated and reserved for it, every allocated device is in
// a pool that reaches the pod's node (a slice of that node, or one without
// a node), and no device is allocated to two claims. Each pod or device in
// breach counts once in DeviceViolations.
func CheckDevices(v *Verdict, pods []*corev1.Pod, claims []*resourceapi.ResourceClaim, slices []*resourceapi.ResourceSlice) {
	// poolNode is the node of a node-local pool, "" for a pool without one.
	poolNode := map[string]string{}
	for _, s := range slices {
		node := ""
		if s.Spec.NodeName != nil {
			node = *s.Spec.NodeName
		}
		poolNode[s.Spec.Driver+"/"+s.Spec.Pool.Name] = node
	}
	byName := map[string]*resourceapi.ResourceClaim{}
	holders := map[string][]string{}
	for _, c := range claims {
		byName[c.Namespace+"/"+c.Name] = c
		if c.Status.Allocation == nil {
			continue
		}
		for _, r := range c.Status.Allocation.Devices.Results {
			if r.ShareID != nil {
				// A shared slice of a device with consumable capacity:
				// several claims may hold it by design.
				continue
			}
			id := r.Driver + "/" + r.Pool + "/" + r.Device
			holders[id] = append(holders[id], c.Name)
		}
	}
	ids := make([]string, 0, len(holders))
	for id := range holders {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		if len(holders[id]) > 1 {
			v.DeviceViolations++
			v.problem("device %s allocated to %d claims: %v", id, len(holders[id]), holders[id])
		}
	}
	for _, p := range pods {
		if p.Spec.NodeName == "" || len(p.Spec.ResourceClaims) == 0 {
			continue
		}
		if why := podDevicesWrong(p, byName, poolNode); why != "" {
			v.DeviceViolations++
			v.problem("pod %s on %s: %s", p.Name, p.Spec.NodeName, why)
		}
	}
}

func podDevicesWrong(p *corev1.Pod, claims map[string]*resourceapi.ResourceClaim, poolNode map[string]string) string {
	generated := map[string]*string{}
	for _, s := range p.Status.ResourceClaimStatuses {
		generated[s.Name] = s.ResourceClaimName
	}
	for _, pc := range p.Spec.ResourceClaims {
		name := pc.ResourceClaimName
		if pc.ResourceClaimTemplateName != nil {
			name = generated[pc.Name]
		}
		if name == nil {
			return fmt.Sprintf("claim %s was never made", pc.Name)
		}
		c := claims[p.Namespace+"/"+*name]
		if c == nil {
			return fmt.Sprintf("claim %s does not exist", *name)
		}
		if c.Status.Allocation == nil {
			return fmt.Sprintf("claim %s is not allocated", *name)
		}
		reserved := false
		for _, r := range c.Status.ReservedFor {
			// A claim of a PodGroup is reserved for the group.
			group := p.Spec.SchedulingGroup != nil && p.Spec.SchedulingGroup.PodGroupName != nil &&
				r.Resource == "podgroups" && r.Name == *p.Spec.SchedulingGroup.PodGroupName
			if r.UID == p.UID || group {
				reserved = true
			}
		}
		if !reserved {
			return fmt.Sprintf("claim %s is not reserved for the pod", *name)
		}
		for _, r := range c.Status.Allocation.Devices.Results {
			node, known := poolNode[r.Driver+"/"+r.Pool]
			if !known {
				return fmt.Sprintf("claim %s holds device %s of unknown pool %s", *name, r.Device, r.Pool)
			}
			if node != "" && node != p.Spec.NodeName {
				return fmt.Sprintf("claim %s holds device %s of node %s", *name, r.Device, node)
			}
		}
	}
	return ""
}
