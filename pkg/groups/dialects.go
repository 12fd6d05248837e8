package groups

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	schedv1alpha3 "k8s.io/api/scheduling/v1alpha3"
	schedv1beta1 "k8s.io/api/scheduling/v1beta1"
	"k8s.io/apimachinery/pkg/util/validation"
	xv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	v1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
)

// This file is the whole of what differs between dialects once an object is
// read: each SpecOf* translates one kind into the Spec the cache and the
// plugins share. Everything downstream (quorum, planning, preemption,
// status counts) is dialect-blind.

// Annotations a scheduler-plugins PodGroup may carry for what its API lacks.
const (
	// XTopologyKeyAnnotation keeps the group's members in one domain of
	// the named node label, as a PodGroup's schedulingConstraints.topology
	// does.
	XTopologyKeyAnnotation = "scheduling.phalanx.dev/topology-key"
	// XParentAnnotation names a scheduling.phalanx.dev CompositePodGroup in
	// the same namespace as the group's parent.
	XParentAnnotation = "scheduling.phalanx.dev/parent"
	// PreferredTopologyAnnotation lists preferred topology levels,
	// narrowest first, comma-separated, on the PodGroups of the APIs that
	// have no field for them (upstream's and scheduler-plugins'), as a
	// Phalanx PodGroup's schedulingConstraints.preferredTopology does.
	PreferredTopologyAnnotation = v1alpha1.PreferredTopologyAnnotation
)

// SpecOfPodGroup reads a Phalanx PodGroup.
func SpecOfPodGroup(pg *v1alpha1.PodGroup) Spec {
	s := Spec{
		UID: pg.UID, Created: pg.CreationTimestamp.Time,
		DisruptionAll:     pg.Spec.DisruptionMode != nil && pg.Spec.DisruptionMode.All != nil,
		PriorityClassName: pg.Spec.PriorityClassName, Priority: pg.Spec.Priority,
		PreemptionPolicy: phalanxPolicy(pg.Spec.PreemptionPolicy),
		Parent:           deref(pg.Spec.ParentCompositePodGroupName),
	}
	if g := pg.Spec.SchedulingPolicy.Gang; g != nil {
		s.Gang, s.MinCount = true, int(g.MinCount)
	}
	if sc := pg.Spec.SchedulingConstraints; sc != nil {
		if len(sc.Topology) > 0 {
			s.TopologyKey = sc.Topology[0].Key
		}
		for _, p := range sc.PreferredTopology {
			s.PreferredKeys = append(s.PreferredKeys, p.Key)
		}
	}
	for _, c := range pg.Spec.ResourceClaims {
		s.Claims = append(s.Claims, GroupClaim{Name: c.Name, ClaimName: deref(c.ResourceClaimName), TemplateName: deref(c.ResourceClaimTemplateName)})
	}
	s.Invalid = templateClaims(s.Claims, "no controller makes a Phalanx PodGroup's claim from a template (a member's entry naming the template would get a claim of its own)")
	if sec := pg.Spec.MinRuntimeSeconds; sec != nil {
		d := time.Duration(*sec) * time.Second
		s.MinRuntime = &d
	} else {
		s.minRuntimeFrom(pg.Annotations)
	}
	return s
}

// minRuntimeFrom reads MinRuntimeAnnotation into s, for the objects whose
// API has no field for it.
func (s *Spec) minRuntimeFrom(annotations map[string]string) {
	d, why := MinRuntimeOf(annotations)
	if why != "" {
		if s.Invalid == "" {
			s.Invalid = why
		}
		return
	}
	s.MinRuntime = d
}

// MinRuntimeOf reads MinRuntimeAnnotation from an object's annotations:
// nil when absent, and why when the value is not a whole number of
// seconds between 0 and a week (the bound the PodGroup field's schema
// sets; the profile caps it further).
func MinRuntimeOf(annotations map[string]string) (d *time.Duration, why string) {
	raw, ok := annotations[v1alpha1.MinRuntimeAnnotation]
	if !ok {
		return nil, ""
	}
	sec, err := strconv.ParseInt(strings.TrimSpace(raw), 10, 32)
	if err != nil || sec < 0 || sec > maxMinRuntimeSeconds {
		return nil, fmt.Sprintf("annotation %s=%q is not a number of seconds between 0 and %d", v1alpha1.MinRuntimeAnnotation, raw, maxMinRuntimeSeconds)
	}
	v := time.Duration(sec) * time.Second
	return &v, ""
}

// maxMinRuntimeSeconds is the schema's bound on spec.minRuntimeSeconds.
const maxMinRuntimeSeconds = 7 * 24 * 3600

// templateClaims refuses group claims made from templates: see the user
// guide's "GPUs through DRA". why says what stands in the way.
func templateClaims(claims []GroupClaim, why string) string {
	for _, c := range claims {
		if c.TemplateName != "" {
			return fmt.Sprintf("spec.resourceClaims[%s]: a group's claim is shared through resourceClaimName, not resourceClaimTemplateName: %s", c.Name, why)
		}
	}
	return ""
}

// SpecOfComposite reads a Phalanx CompositePodGroup.
func SpecOfComposite(cpg *v1alpha1.CompositePodGroup) Spec {
	s := Spec{
		UID: cpg.UID, Created: cpg.CreationTimestamp.Time,
		DisruptionAll:     cpg.Spec.DisruptionMode != nil && cpg.Spec.DisruptionMode.All != nil,
		PriorityClassName: cpg.Spec.PriorityClassName, Priority: cpg.Spec.Priority,
		PreemptionPolicy: phalanxPolicy(cpg.Spec.PreemptionPolicy),
		Parent:           deref(cpg.Spec.ParentCompositePodGroupName),
	}
	if g := cpg.Spec.SchedulingPolicy.Gang; g != nil {
		s.Gang, s.MinGroupCount = true, int(g.MinGroupCount)
	}
	if sc := cpg.Spec.SchedulingConstraints; sc != nil && len(sc.Topology) > 0 {
		s.TopologyKey = sc.Topology[0].Key
	}
	s.minRuntimeFrom(cpg.Annotations)
	return s
}

// SpecOfNativePodGroup reads an upstream scheduling.k8s.io/v1beta1
// PodGroup. The API server has validated it, so it is taken as written.
func SpecOfNativePodGroup(pg *schedv1beta1.PodGroup) Spec {
	s := Spec{
		UID: pg.UID, Created: pg.CreationTimestamp.Time,
		DisruptionAll:     pg.Spec.DisruptionMode != nil && pg.Spec.DisruptionMode.All != nil,
		PriorityClassName: pg.Spec.PriorityClassName, Priority: pg.Spec.Priority,
		PreemptionPolicy: nativePolicy(pg.Spec.PreemptionPolicy),
		Parent:           deref(pg.Spec.ParentCompositePodGroupName),
	}
	if g := pg.Spec.SchedulingPolicy.Gang; g != nil {
		s.Gang, s.MinCount = true, int(g.MinCount)
	}
	if sc := pg.Spec.SchedulingConstraints; sc != nil && len(sc.Topology) > 0 {
		s.TopologyKey = sc.Topology[0].Key
	}
	// Upstream's API has one required key and no preference; the levels
	// come from an annotation, as for scheduler-plugins' PodGroups.
	s.PreferredKeys, s.Invalid = preferredFromAnnotation(pg.Annotations, s.TopologyKey)
	// A claim from a template is made for the PodGroup by
	// kube-controller-manager; whether its members can use it depends on
	// the scheduler's profile (PhalanxDynamicResources), which the plan
	// input checks.
	for _, c := range pg.Spec.ResourceClaims {
		gc := GroupClaim{Name: c.Name, ClaimName: deref(c.ResourceClaimName), TemplateName: deref(c.ResourceClaimTemplateName)}
		if gc.TemplateName != "" {
			for _, st := range pg.Status.ResourceClaimStatuses {
				if st.Name == c.Name {
					gc.Made = deref(st.ResourceClaimName)
				}
			}
		}
		s.Claims = append(s.Claims, gc)
	}
	s.minRuntimeFrom(pg.Annotations)
	return s
}

// SpecOfNativeComposite reads an upstream scheduling.k8s.io/v1alpha3
// CompositePodGroup.
func SpecOfNativeComposite(cpg *schedv1alpha3.CompositePodGroup) Spec {
	s := Spec{
		UID: cpg.UID, Created: cpg.CreationTimestamp.Time,
		DisruptionAll:     cpg.Spec.DisruptionMode != nil && cpg.Spec.DisruptionMode.All != nil,
		PriorityClassName: cpg.Spec.PriorityClassName, Priority: cpg.Spec.Priority,
		PreemptionPolicy: alpha3Policy(cpg.Spec.PreemptionPolicy),
		Parent:           deref(cpg.Spec.ParentCompositePodGroupName),
	}
	if g := cpg.Spec.SchedulingPolicy.Gang; g != nil {
		s.Gang, s.MinGroupCount = true, int(g.MinGroupCount)
	}
	if sc := cpg.Spec.SchedulingConstraints; sc != nil && len(sc.Topology) > 0 {
		s.TopologyKey = sc.Topology[0].Key
	}
	if _, ok := cpg.Annotations[PreferredTopologyAnnotation]; ok {
		s.Invalid = fmt.Sprintf("annotation %s: preferred topology levels belong on PodGroups, not on a CompositePodGroup", PreferredTopologyAnnotation)
	}
	s.minRuntimeFrom(cpg.Annotations)
	return s
}

// SpecOfXPodGroup reads a scheduler-plugins scheduling.x-k8s.io/v1alpha1
// PodGroup. Every such group is a gang of minMember. Its CRD may be an old
// copy without validation, so what Phalanx cannot schedule is reported in
// Invalid rather than trusted. Topology and parent, which that API lacks,
// come from annotations.
func SpecOfXPodGroup(pg *xv1alpha1.PodGroup) Spec {
	s := Spec{
		UID: pg.UID, Created: pg.CreationTimestamp.Time,
		Gang: true, MinCount: int(pg.Spec.MinMember),
		PriorityFromMembers: true,
		TopologyKey:         pg.Annotations[XTopologyKeyAnnotation],
		Parent:              pg.Annotations[XParentAnnotation],
	}
	if len(pg.Spec.MinResources) > 0 {
		s.MinResources = pg.Spec.MinResources.DeepCopy()
	}
	if t := pg.Spec.ScheduleTimeoutSeconds; t != nil {
		// 0 asks for the scheduler's default, as scheduler-plugins reads
		// it: the MPI Operator writes 0 when a job sets no timeout, and
		// Kubeflow Trainer documents 0 as "the default".
		switch {
		case *t > 0:
			s.WaitTimeout = time.Duration(*t) * time.Second
		case *t < 0:
			s.Invalid = fmt.Sprintf("spec.scheduleTimeoutSeconds is %d: set it to 1 or more, or to 0 or nothing for the scheduler's default", *t)
		}
	}
	switch {
	case pg.Spec.MinMember < 1:
		s.Invalid = fmt.Sprintf("spec.minMember is %d: a gang needs at least 1 member", pg.Spec.MinMember)
	case s.TopologyKey != "" && !validTopologyKey(s.TopologyKey):
		s.Invalid = fmt.Sprintf("annotation %s=%q is not a valid node label key or device attribute key: %s", XTopologyKeyAnnotation, s.TopologyKey, strings.Join(v1alpha1.ValidateTopologyKey(s.TopologyKey), "; "))
	case s.Parent != "" && !validName(s.Parent):
		s.Invalid = fmt.Sprintf("annotation %s=%q is not a valid CompositePodGroup name", XParentAnnotation, s.Parent)
	default:
		var why string
		if s.PreferredKeys, why = preferredFromAnnotation(pg.Annotations, s.TopologyKey); why != "" {
			s.Invalid = why
		}
	}
	for name, q := range s.MinResources {
		if q.Sign() < 0 {
			s.Invalid = fmt.Sprintf("spec.minResources[%s] is %s: it cannot be negative", name, q.String())
		}
	}
	s.minRuntimeFrom(pg.Annotations)
	return s
}

// preferredFromAnnotation reads PreferredTopologyAnnotation: label keys,
// narrowest first, separated by commas. It applies the rules a Phalanx
// PodGroup's schema applies to preferredTopology, and says what is wrong
// in terms of the annotation.
func preferredFromAnnotation(annotations map[string]string, required string) (keys []string, invalid string) {
	raw, ok := annotations[PreferredTopologyAnnotation]
	if !ok {
		return nil, ""
	}
	bad := func(format string, args ...any) ([]string, string) {
		return nil, fmt.Sprintf("annotation %s=%q: %s", PreferredTopologyAnnotation, raw, fmt.Sprintf(format, args...))
	}
	for i, k := range strings.Split(raw, ",") {
		k = strings.TrimSpace(k)
		switch {
		case k == "":
			return bad("level %d is empty: list node label keys narrowest first, separated by commas", i+1)
		case !validTopologyKey(k):
			return bad("%q is not a valid node label key or device attribute key: %s", k, strings.Join(v1alpha1.ValidateTopologyKey(k), "; "))
		case k == required:
			return bad("%q is the required topology key: list only levels narrower than it", k)
		case slices.Contains(keys, k):
			return bad("%q appears twice", k)
		}
		keys = append(keys, k)
	}
	if len(keys) > v1alpha1.MaxPreferredTopology {
		return bad("%d levels, at most %d", len(keys), v1alpha1.MaxPreferredTopology)
	}
	return keys, ""
}

func deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

func policyOf(never bool) *corev1.PreemptionPolicy {
	v := corev1.PreemptLowerPriority
	if never {
		v = corev1.PreemptNever
	}
	return &v
}

func phalanxPolicy(p *v1alpha1.PreemptionPolicy) *corev1.PreemptionPolicy {
	if p == nil {
		return nil
	}
	return policyOf(*p == v1alpha1.PreemptNever)
}

func nativePolicy(p *schedv1beta1.PreemptionPolicy) *corev1.PreemptionPolicy {
	if p == nil {
		return nil
	}
	return policyOf(*p == schedv1beta1.PreemptNever)
}

func alpha3Policy(p *schedv1alpha3.PreemptionPolicy) *corev1.PreemptionPolicy {
	if p == nil {
		return nil
	}
	return policyOf(*p == schedv1alpha3.PreemptNever)
}

// validTopologyKey accepts what the CRD schema accepts as a topology key:
// a node label key, or a device attribute key.
func validTopologyKey(k string) bool { return len(v1alpha1.ValidateTopologyKey(k)) == 0 }

func validName(n string) bool { return len(validation.IsDNS1123Subdomain(n)) == 0 }
