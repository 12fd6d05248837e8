package sim

import (
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Limits that keep a scenario a demo rather than a benchmark.
const (
	maxNameLength   = 40
	maxClusterNodes = 2000
	maxGeneratedSet = 1000
	defaultTimeout  = 30 * time.Second
	maxTimeout      = 10 * time.Minute
	defaultHold     = 2 * time.Second
)

// Node label keys of the sandbox topology, and the short forms scenarios
// may use for them.
const (
	ZoneLabel     = corev1.LabelTopologyZone
	BlockLabel    = "topology.phalanx.dev/block"
	RackLabel     = "topology.phalanx.dev/rack"
	HostnameLabel = corev1.LabelHostname
)

var keyAliases = map[string]string{"zone": ZoneLabel, "block": BlockLabel, "rack": RackLabel, "hostname": HostnameLabel, "node": HostnameLabel}

// resolveKey expands a short topology key.
func resolveKey(k string) string {
	if full, ok := keyAliases[k]; ok {
		return full
	}
	return k
}

// Delete kinds a scenario may name.
var deletableKinds = []string{"Pod", "Job", "PodGroup", "CompositePodGroup", "Workload"}

// Validate checks every field, fills defaults and parses durations. Decode
// calls it; Run calls it again for scenarios built in Go.
func (sc *Scenario) Validate() error {
	var errs field.ErrorList
	errs = append(errs, validateName(field.NewPath("name"), sc.Name, validation.IsDNS1123Label, maxNameLength)...)
	errs = append(errs, sc.Cluster.validate(field.NewPath("cluster"))...)

	classes := sets.New[string]()
	for i, pc := range sc.PriorityClasses {
		p := field.NewPath("priorityClasses").Index(i)
		errs = append(errs, validateName(p.Child("name"), pc.Name, validation.IsDNS1123Subdomain, 253)...)
		if strings.HasPrefix(pc.Name, "system-") {
			errs = append(errs, field.Invalid(p.Child("name"), pc.Name, "names starting with system- are reserved by Kubernetes"))
		}
		if classes.Has(pc.Name) {
			errs = append(errs, field.Duplicate(p.Child("name"), pc.Name))
		}
		classes.Insert(pc.Name)
		if pc.Value > 1_000_000_000 {
			errs = append(errs, field.Invalid(p.Child("value"), pc.Value, "must be at most 1000000000; higher values are reserved for system classes"))
		}
		switch pc.PreemptionPolicy {
		case "", corev1.PreemptLowerPriority, corev1.PreemptNever:
		default:
			errs = append(errs, field.NotSupported(p.Child("preemptionPolicy"), pc.PreemptionPolicy,
				[]corev1.PreemptionPolicy{corev1.PreemptLowerPriority, corev1.PreemptNever}))
		}
	}

	if sc.Scheduler != nil {
		errs = append(errs, sc.Scheduler.validate(field.NewPath("scheduler"))...)
	}
	if len(sc.Steps) == 0 {
		errs = append(errs, field.Required(field.NewPath("steps"), "a scenario needs at least one step"))
	}
	for i := range sc.Steps {
		errs = append(errs, sc.Steps[i].validate(field.NewPath("steps").Index(i), classes)...)
	}
	if len(errs) > 0 {
		ve := &ValidationError{Scenario: sc.Name}
		for _, e := range errs {
			ve.Problems = append(ve.Problems, e.Error())
		}
		return ve
	}
	sc.validated = true
	return nil
}

func validateName(p *field.Path, name string, check func(string) []string, maxLen int) field.ErrorList {
	if name == "" {
		return field.ErrorList{field.Required(p, "")}
	}
	var errs field.ErrorList
	for _, msg := range check(name) {
		errs = append(errs, field.Invalid(p, name, msg))
	}
	if len(name) > maxLen {
		errs = append(errs, field.TooLong(p, name, maxLen))
	}
	return errs
}

func (c *ClusterSpec) validate(p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, f := range []struct {
		name string
		v    int
	}{{"zones", c.Zones}, {"racks", c.Racks}, {"nodesPerRack", c.NodesPerRack}} {
		if f.v < 1 {
			errs = append(errs, field.Invalid(p.Child(f.name), f.v, "must be at least 1"))
		}
	}
	if n := c.Zones * c.Racks * c.NodesPerRack; n > maxClusterNodes {
		errs = append(errs, field.Invalid(p, n, fmt.Sprintf("%d nodes is more than the %d a scenario may create", n, maxClusterNodes)))
	}
	errs = append(errs, validateAmount(p.Child("cpu"), c.CPU)...)
	errs = append(errs, validateAmount(p.Child("memory"), c.Memory)...)
	errs = append(errs, nonNegative(p.Child("gpus"), c.GPUs)...)
	errs = append(errs, nonNegative(p.Child("pods"), c.Pods)...)
	errs = append(errs, nonNegative(p.Child("racksPerBlock"), c.RacksPerBlock)...)
	if d := c.DRA; d != nil {
		dp := p.Child("dra")
		errs = append(errs, nonNegative(dp.Child("devicesPerNode"), d.DevicesPerNode)...)
		errs = append(errs, nonNegative(dp.Child("domainDevices"), d.DomainDevices)...)
		switch {
		case d.DomainKey != "":
			for _, msg := range validation.IsQualifiedName(resolveKey(d.DomainKey)) {
				errs = append(errs, field.Invalid(dp.Child("domainKey"), d.DomainKey, msg))
			}
			if d.DomainDevices < 1 {
				errs = append(errs, field.Invalid(dp.Child("domainDevices"), d.DomainDevices, "must be at least 1 with a domainKey"))
			}
		case d.DomainDevices > 0:
			errs = append(errs, field.Required(dp.Child("domainKey"), "the node label whose domains get domainDevices each, e.g. rack"))
		}
	}
	return errs
}

func validateAmount(p *field.Path, a Amount) field.ErrorList {
	if a == "" {
		return nil
	}
	q, err := resource.ParseQuantity(string(a))
	if err != nil {
		return field.ErrorList{field.Invalid(p, string(a), "must be a quantity such as 4, 500m or 64Gi")}
	}
	if q.Sign() < 0 {
		return field.ErrorList{field.Invalid(p, string(a), "must not be negative")}
	}
	return nil
}

func nonNegative(p *field.Path, v int) field.ErrorList {
	if v < 0 {
		return field.ErrorList{field.Invalid(p, v, "must not be negative")}
	}
	return nil
}

func (st *Step) validate(p *field.Path, classes sets.Set[string]) field.ErrorList {
	var errs field.ErrorList
	if st.Name == "" {
		errs = append(errs, field.Required(p.Child("name"), "say what the step does; it titles the step in the report"))
	}
	var actions []string
	if st.Create != nil {
		actions = append(actions, "create")
		errs = append(errs, st.Create.validate(p.Child("create"), classes)...)
	}
	if st.AddNodes != nil {
		actions = append(actions, "addNodes")
		errs = append(errs, st.AddNodes.validate(p.Child("addNodes"))...)
	}
	if st.DeleteNodes != nil {
		actions = append(actions, "deleteNodes")
		errs = append(errs, st.DeleteNodes.validate(p.Child("deleteNodes"))...)
	}
	if st.Delete != nil {
		actions = append(actions, "delete")
		errs = append(errs, st.Delete.validate(p.Child("delete"))...)
	}
	if st.Wait != nil {
		actions = append(actions, "wait")
		errs = append(errs, st.Wait.validate(p.Child("wait"))...)
	}
	if st.Stream != nil {
		actions = append(actions, "stream")
		errs = append(errs, st.Stream.validate(p.Child("stream"), classes)...)
	}
	if len(actions) != 1 {
		errs = append(errs, field.Invalid(p, strings.Join(actions, ", "),
			"a step does exactly one of create, addNodes, deleteNodes, delete, wait or stream; split it into several steps"))
	}
	for i, e := range st.Expect {
		errs = append(errs, e.validate(p.Child("expect").Index(i))...)
	}
	return errs
}

func (c *Create) validate(p *field.Path, classes sets.Set[string]) field.ErrorList {
	var errs field.ErrorList
	if len(c.Objects)+len(c.Gangs)+len(c.Pods) == 0 {
		errs = append(errs, field.Required(p, "list objects, gangs or pods to create"))
	}
	c.objects = c.objects[:0]
	for i, raw := range c.Objects {
		obj, oerrs := decodeInline(raw, p.Child("objects").Index(i))
		errs = append(errs, oerrs...)
		if len(oerrs) == 0 {
			c.objects = append(c.objects, obj)
		}
	}
	for i := range c.Gangs {
		errs = append(errs, c.Gangs[i].validate(p.Child("gangs").Index(i), classes)...)
	}
	for i, ps := range c.Pods {
		pp := p.Child("pods").Index(i)
		errs = append(errs, validateName(pp.Child("name"), ps.Name, validation.IsDNS1123Label, maxNameLength)...)
		if ps.Count < 1 || ps.Count > maxGeneratedSet {
			errs = append(errs, field.Invalid(pp.Child("count"), ps.Count, fmt.Sprintf("must be between 1 and %d", maxGeneratedSet)))
		}
		errs = append(errs, validateAmount(pp.Child("cpu"), ps.CPU)...)
		errs = append(errs, validateAmount(pp.Child("memory"), ps.Memory)...)
		errs = append(errs, nonNegative(pp.Child("gpus"), ps.GPUs)...)
		errs = append(errs, validateClassRef(pp.Child("priorityClass"), ps.PriorityClass, classes)...)
	}
	return errs
}

func (g *Gang) validate(p *field.Path, classes sets.Set[string]) field.ErrorList {
	var errs field.ErrorList
	errs = append(errs, validateName(p.Child("name"), g.Name, validation.IsDNS1123Label, 63)...)
	if g.Size < 1 || g.Size > maxGeneratedSet {
		errs = append(errs, field.Invalid(p.Child("size"), g.Size, fmt.Sprintf("must be between 1 and %d", maxGeneratedSet)))
	}
	if g.MinCount < 0 {
		errs = append(errs, field.Invalid(p.Child("minCount"), g.MinCount, "must be at least 1; leave it out for all of size"))
	}
	errs = append(errs, validateAmount(p.Child("cpu"), g.CPU)...)
	errs = append(errs, validateAmount(p.Child("memory"), g.Memory)...)
	errs = append(errs, nonNegative(p.Child("gpus"), g.GPUs)...)
	errs = append(errs, validateClassRef(p.Child("priorityClass"), g.PriorityClass, classes)...)
	if g.TopologyKey != "" {
		for _, msg := range validation.IsQualifiedName(resolveKey(g.TopologyKey)) {
			errs = append(errs, field.Invalid(p.Child("topologyKey"), g.TopologyKey, msg))
		}
	}
	seen := sets.New[string]()
	for i, k := range g.PreferredTopology {
		pp := p.Child("preferredTopology").Index(i)
		full := resolveKey(k)
		for _, msg := range validation.IsQualifiedName(full) {
			errs = append(errs, field.Invalid(pp, k, msg))
		}
		switch {
		case seen.Has(full):
			errs = append(errs, field.Duplicate(pp, k))
		case full == resolveKey(g.TopologyKey):
			errs = append(errs, field.Invalid(pp, k, "is the gang's topologyKey: list only levels narrower than it"))
		}
		seen.Insert(full)
	}
	for _, ref := range []struct{ name, v string }{{"claimTemplate", g.ClaimTemplate}, {"sharedClaim", g.SharedClaim}} {
		if ref.v == "" {
			continue
		}
		for _, msg := range validation.IsDNS1123Subdomain(ref.v) {
			errs = append(errs, field.Invalid(p.Child(ref.name), ref.v, msg))
		}
	}
	if g.PodPrefix != "" {
		for _, msg := range validation.IsDNS1123Subdomain(g.PodPrefix + "0") {
			errs = append(errs, field.Invalid(p.Child("podPrefix"), g.PodPrefix, msg))
		}
	}
	switch g.API {
	case "", APIUpstream:
	default:
		errs = append(errs, field.NotSupported(p.Child("api"), g.API, []string{APIUpstream}))
	}
	if g.API == APIUpstream && g.LabelPair {
		errs = append(errs, field.Forbidden(p.Child("labelPair"), "an upstream gang is a scheduling.k8s.io PodGroup; remove labelPair or api"))
	}
	if g.LabelPair {
		for _, f := range []struct {
			name string
			set  bool
		}{{"topologyKey", g.TopologyKey != ""}, {"preferredTopology", len(g.PreferredTopology) > 0}, {"disruptionAll", g.DisruptionAll}, {"parent", g.Parent != ""}} {
			if f.set {
				errs = append(errs, field.Forbidden(p.Child(f.name), "a labelPair gang has no PodGroup object to carry it; set labelPair: false"))
			}
		}
	}
	if g.Parent != "" {
		for _, msg := range validation.IsDNS1123Subdomain(g.Parent) {
			errs = append(errs, field.Invalid(p.Child("parent"), g.Parent, msg))
		}
	}
	g.runtime = 0
	if g.Runtime != "" {
		var err error
		if g.runtime, err = time.ParseDuration(g.Runtime); err != nil || g.runtime <= 0 || g.runtime > maxTimeout {
			errs = append(errs, field.Invalid(p.Child("runtime"), g.Runtime, fmt.Sprintf("must be a duration such as 20s, at most %s", maxTimeout)))
		}
	}
	if g.ReserveAfter != "" {
		if g.LabelPair || g.API == APIUpstream {
			errs = append(errs, field.Forbidden(p.Child("reserveAfter"), "only a Phalanx PodGroup carries the reserve-after-seconds annotation"))
		}
		if _, ok := g.reserveAfterSeconds(); !ok {
			errs = append(errs, field.Invalid(p.Child("reserveAfter"), g.ReserveAfter, "must be a whole number of seconds such as 5s, or never"))
		}
	}
	if g.MinRuntime != "" {
		if g.LabelPair {
			errs = append(errs, field.Forbidden(p.Child("minRuntime"), "a labelPair gang has no PodGroup object to carry it; set labelPair: false"))
		}
		if _, ok := g.minRuntimeSeconds(); !ok {
			errs = append(errs, field.Invalid(p.Child("minRuntime"), g.MinRuntime, fmt.Sprintf("must be a whole number of seconds such as 10s, at most %s", maxTimeout)))
		}
	}
	return errs
}

// reserveAfterSeconds is the annotation value of ReserveAfter: seconds,
// or -1 for never.
func (g *Gang) reserveAfterSeconds() (int64, bool) {
	if g.ReserveAfter == "never" {
		return -1, true
	}
	d, err := time.ParseDuration(g.ReserveAfter)
	if err != nil || d < 0 || d > maxTimeout || d%time.Second != 0 {
		return 0, false
	}
	return int64(d / time.Second), true
}

// Limits of a stream.
const (
	maxStreamRate    = 100.0
	maxStreamRuntime = maxTimeout
)

func (s *Stream) validate(p *field.Path, classes sets.Set[string]) field.ErrorList {
	var errs field.ErrorList
	errs = append(errs, validateName(p.Child("name"), s.Name, validation.IsDNS1123Label, maxNameLength)...)
	if s.Count < 1 || s.Count > maxGeneratedSet {
		errs = append(errs, field.Invalid(p.Child("count"), s.Count, fmt.Sprintf("must be between 1 and %d", maxGeneratedSet)))
	}
	if !(s.RatePerSecond > 0 && s.RatePerSecond <= maxStreamRate) {
		errs = append(errs, field.Invalid(p.Child("ratePerSecond"), s.RatePerSecond, fmt.Sprintf("must be above 0 and at most %g pods a second", maxStreamRate)))
	}
	parse := func(name, v string, zeroOK bool) time.Duration {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 || (d == 0 && !zeroOK) || d > maxStreamRuntime {
			errs = append(errs, field.Invalid(p.Child(name), v, fmt.Sprintf("must be a duration such as 5s, at most %s", maxStreamRuntime)))
			return 0
		}
		return d
	}
	s.minRuntime = parse("minRuntime", s.MinRuntime, false)
	s.maxRuntime = parse("maxRuntime", s.MaxRuntime, false)
	if s.minRuntime > 0 && s.maxRuntime > 0 && s.maxRuntime < s.minRuntime {
		errs = append(errs, field.Invalid(p.Child("maxRuntime"), s.MaxRuntime, "must not be shorter than minRuntime "+s.MinRuntime))
	}
	s.slack = 0
	if s.DeadlineSlack != "" {
		s.slack = parse("deadlineSlack", s.DeadlineSlack, true)
	}
	errs = append(errs, validateAmount(p.Child("cpu"), s.CPU)...)
	errs = append(errs, validateAmount(p.Child("memory"), s.Memory)...)
	errs = append(errs, nonNegative(p.Child("gpus"), s.GPUs)...)
	errs = append(errs, validateClassRef(p.Child("priorityClass"), s.PriorityClass, classes)...)
	return errs
}

func (s *SchedulerSpec) validate(p *field.Path) field.ErrorList {
	r := s.Reservation
	if r == nil {
		return field.ErrorList{field.Required(p.Child("reservation"), "the scheduler block sets reservation; leave the block out to run under the cluster's configuration")}
	}
	p = p.Child("reservation")
	var errs field.ErrorList
	if r.AfterSeconds < 0 {
		errs = append(errs, field.Invalid(p.Child("afterSeconds"), r.AfterSeconds, "must not be negative"))
	}
	if r.MaxHoldSeconds < 0 {
		errs = append(errs, field.Invalid(p.Child("maxHoldSeconds"), r.MaxHoldSeconds, "must be positive; leave it out for the default"))
	}
	if r.MaxSharePercent < 0 || r.MaxSharePercent > 100 {
		errs = append(errs, field.Invalid(p.Child("maxSharePercent"), r.MaxSharePercent, "must be 1 to 100; leave it out for the default"))
	}
	return errs
}

func validateClassRef(p *field.Path, name string, classes sets.Set[string]) field.ErrorList {
	if name == "" || classes.Has(name) {
		return nil
	}
	declared := "none are declared"
	if classes.Len() > 0 {
		declared = "declared: " + strings.Join(sets.List(classes), ", ")
	}
	return field.ErrorList{field.Invalid(p, name, "no such PriorityClass; declare it under priorityClasses ("+declared+")")}
}

func (a *AddNodes) validate(p *field.Path) field.ErrorList {
	var errs field.ErrorList
	errs = append(errs, validateName(p.Child("prefix"), a.Prefix, validation.IsDNS1123Label, maxNameLength)...)
	if a.Count < 1 || a.Count > maxClusterNodes {
		errs = append(errs, field.Invalid(p.Child("count"), a.Count, fmt.Sprintf("must be between 1 and %d", maxClusterNodes)))
	}
	errs = append(errs, validateAmount(p.Child("cpu"), a.CPU)...)
	errs = append(errs, validateAmount(p.Child("memory"), a.Memory)...)
	errs = append(errs, nonNegative(p.Child("gpus"), a.GPUs)...)
	for _, f := range []struct{ name, v string }{{"zone", a.Zone}, {"rack", a.Rack}} {
		if f.v == "" {
			continue
		}
		for _, msg := range validation.IsValidLabelValue(f.v) {
			errs = append(errs, field.Invalid(p.Child(f.name), f.v, msg))
		}
	}
	return errs
}

func (d *DeleteNodes) validate(p *field.Path) field.ErrorList {
	if (len(d.Names) > 0) == (d.Prefix != "") {
		return field.ErrorList{field.Invalid(p, "", "set exactly one of names and prefix")}
	}
	return nil
}

func (d *Delete) validate(p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if !sets.New(deletableKinds...).Has(d.Kind) {
		errs = append(errs, field.NotSupported(p.Child("kind"), d.Kind, deletableKinds))
	}
	if (d.Name != "") == (d.Prefix != "") {
		errs = append(errs, field.Invalid(p, "", "set exactly one of name and prefix"))
	}
	return errs
}

func (w *Wait) validate(p *field.Path) field.ErrorList {
	var errs field.ErrorList
	switch w.For {
	case "bound", "done", "pending":
	default:
		errs = append(errs, field.NotSupported(p.Child("for"), w.For, []string{"bound", "done", "pending"}))
	}
	if (w.Group != "") == (w.Prefix != "") {
		errs = append(errs, field.Invalid(p, "", "set exactly one of group and prefix to select the pods to wait for"))
	}
	errs = append(errs, nonNegative(p.Child("count"), w.Count)...)
	var err error
	w.timeout = defaultTimeout
	if w.Timeout != "" {
		if w.timeout, err = time.ParseDuration(w.Timeout); err != nil || w.timeout <= 0 || w.timeout > maxTimeout {
			errs = append(errs, field.Invalid(p.Child("timeout"), w.Timeout, fmt.Sprintf("must be a duration such as 30s, at most %s", maxTimeout)))
		}
	}
	w.duration = 0
	if w.For == "pending" {
		w.duration = defaultHold
	}
	if w.Duration != "" {
		if w.For != "pending" {
			errs = append(errs, field.Forbidden(p.Child("duration"), `only a wait for "pending" holds for a duration`))
		} else if w.duration, err = time.ParseDuration(w.Duration); err != nil || w.duration <= 0 || w.duration > maxTimeout {
			errs = append(errs, field.Invalid(p.Child("duration"), w.Duration, fmt.Sprintf("must be a duration such as 2s, at most %s", maxTimeout)))
		}
	}
	return errs
}

func (e *Expectation) validate(p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if e.Group == "" {
		errs = append(errs, field.Required(p.Child("group"), "name the group (PodGroup, CompositePodGroup, label gang or pod set) to check"))
	}
	if e.Bound == nil && e.Pending == nil && e.Done == nil && e.Evicted == nil && e.SameDomain == "" && e.Spans == nil && e.Crossings == nil {
		errs = append(errs, field.Required(p, "set at least one of bound, pending, done, evicted, sameDomain, spans and crossings"))
	}
	for _, f := range []struct {
		name string
		v    *int
	}{{"bound", e.Bound}, {"pending", e.Pending}, {"done", e.Done}, {"evicted", e.Evicted}} {
		if f.v != nil {
			errs = append(errs, nonNegative(p.Child(f.name), *f.v)...)
		}
	}
	if e.SameDomain != "" {
		for _, msg := range validation.IsQualifiedName(resolveKey(e.SameDomain)) {
			errs = append(errs, field.Invalid(p.Child("sameDomain"), e.SameDomain, msg))
		}
	}
	if s := e.Spans; s != nil {
		for _, msg := range validation.IsQualifiedName(resolveKey(s.Key)) {
			errs = append(errs, field.Invalid(p.Child("spans", "key"), s.Key, msg))
		}
		if s.Count < 1 {
			errs = append(errs, field.Invalid(p.Child("spans", "count"), s.Count, "must be at least 1"))
		}
	}
	if c := e.Crossings; c != nil {
		for _, msg := range validation.IsQualifiedName(resolveKey(c.Key)) {
			errs = append(errs, field.Invalid(p.Child("crossings", "key"), c.Key, msg))
		}
		errs = append(errs, nonNegative(p.Child("crossings", "count"), c.Count)...)
	}
	return errs
}
