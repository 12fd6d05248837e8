package inspect

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	fwk "k8s.io/kube-scheduler/framework"

	v1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
	"github.com/phalanx-sched/phalanx/pkg/debugapi"
	"github.com/phalanx-sched/phalanx/pkg/gangcore"
	"github.com/phalanx-sched/phalanx/pkg/groups"
	"github.com/phalanx-sched/phalanx/pkg/plugins/pluginrt"
)

// requestError is a failure the caller caused, with its HTTP status.
type requestError struct {
	code int
	msg  string
}

func (e *requestError) Error() string { return e.msg }

func notFound(format string, args ...any) error {
	return &requestError{code: http.StatusNotFound, msg: fmt.Sprintf(format, args...)}
}

func badRequest(format string, args ...any) error {
	return &requestError{code: http.StatusBadRequest, msg: fmt.Sprintf(format, args...)}
}

// target is what explain was asked about.
type target struct {
	kind    string // pod, podgroup, compositepodgroup, workload
	dialect *groups.Dialect
}

// parseKind reads a kind the way kubectl takes a resource: singular,
// plural or short name, optionally qualified by its API group.
func parseKind(s string) (target, error) {
	name, group, _ := strings.Cut(strings.ToLower(s), ".")
	var t target
	switch name {
	case "pod", "pods", "po":
		t.kind = "pod"
	case "podgroup", "podgroups", "pg", "ppg":
		t.kind = "podgroup"
	case "compositepodgroup", "compositepodgroups", "cpg", "pcpg":
		t.kind = "compositepodgroup"
	case "workload", "workloads", "wl", "pwl":
		t.kind = "workload"
	default:
		return t, badRequest("cannot explain %q: use pod, podgroup, compositepodgroup or workload", s)
	}
	// Phalanx's short names name its own API.
	if name == "ppg" || name == "pcpg" || name == "pwl" {
		group = groups.Phalanx.String()
	}
	if group != "" {
		for _, d := range groups.Dialects {
			if d.String() == group {
				d := d
				t.dialect = &d
			}
		}
		if t.dialect == nil || (t.kind == "pod" && group != "") {
			return t, badRequest("cannot explain %q: unknown API group %q", s, group)
		}
	}
	if t.kind == "workload" && t.dialect != nil && *t.dialect != groups.Phalanx {
		return t, badRequest("cannot explain %q: only scheduling.phalanx.dev Workloads are explained; explain their PodGroups", s)
	}
	return t, nil
}

// Explain answers for a pod, a group or a Workload.
func (in *Inspector) Explain(ctx context.Context, kind, namespace, name string) (*debugapi.ExplanationList, error) {
	t, err := parseKind(kind)
	if err != nil {
		return nil, err
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	infos, err := in.refresh(ctx)
	if err != nil {
		return nil, err
	}
	out := &debugapi.ExplanationList{TypeMeta: typeMeta("ExplanationList"), Answer: in.answer(len(infos))}
	var keys []groups.Key
	var hint *corev1.Pod
	switch t.kind {
	case "pod":
		pod, err := in.profiles[in.names[0]].real.SharedInformerFactory().Core().V1().Pods().Lister().Pods(namespace).Get(name)
		if apierrors.IsNotFound(err) {
			return nil, notFound("pod %s/%s not found", namespace, name)
		}
		if err != nil {
			return nil, err
		}
		out.Target = fmt.Sprintf("Pod %s/%s", namespace, name)
		a, grouped, err := groups.Attach(pod)
		if !grouped {
			return nil, notFound("pod %s/%s belongs to no group: Phalanx explains groups (kubectl describe pod tells the pod's own story)", namespace, name)
		}
		if err != nil {
			out.Items = append(out.Items, debugapi.Explanation{Stage: debugapi.StageInvalid, Message: err.Error()})
			return out, nil
		}
		keys, hint = []groups.Key{a.Key}, pod
	case "workload":
		out.Target = fmt.Sprintf("Workload %s/%s", namespace, name)
		if keys, err = in.workloadGroups(namespace, name); err != nil {
			return nil, err
		}
		if len(keys) == 0 {
			return nil, notFound("no group of Workload %s/%s is in the scheduler's group cache (phalanx-controller creates them from the Workload's templates)", namespace, name)
		}
	default:
		want := groups.PodGroupKind
		out.Target = "PodGroup"
		if t.kind == "compositepodgroup" {
			want, out.Target = groups.CompositeKind, "CompositePodGroup"
		}
		if t.dialect != nil {
			out.Target += "." + t.dialect.String()
		}
		out.Target += " " + namespace + "/" + name
		keys = in.fed.Find(namespace, name, func(k groups.Key) bool {
			return k.Kind == want && (t.dialect == nil || k.Dialect == *t.dialect)
		})
		if len(keys) == 0 && want == groups.PodGroupKind && t.dialect == nil {
			// A label gang has no object; it is asked about by its name.
			keys = in.fed.Find(namespace, name, func(k groups.Key) bool { return k.Kind == groups.LabelKind })
		}
		if len(keys) == 0 {
			return nil, notFound("%s is not in the scheduler's group cache: no such object, and no pod names it", out.Target)
		}
	}
	seen := map[groups.Key]bool{}
	for _, k := range keys {
		root, ok := in.fed.RootOf(k)
		if ok && seen[root] {
			continue
		}
		seen[root] = true
		e, err := in.explainKey(ctx, k, infos, hint)
		if err != nil {
			return nil, err
		}
		out.Items = append(out.Items, *e)
	}
	if len(out.Items) > 0 && out.Profile == "" {
		out.Profile = out.Items[0].Profile
	}
	return out, nil
}

func typeMeta(kind string) metav1.TypeMeta {
	return metav1.TypeMeta{APIVersion: debugapi.APIVersion, Kind: kind}
}

func (in *Inspector) answer(nodes int) debugapi.Answer {
	return debugapi.Answer{Scheduler: in.opts.Identity, Time: metav1.Now(), Nodes: nodes}
}

// workloadGroups are the groups a Phalanx Workload's templates made.
func (in *Inspector) workloadGroups(namespace, name string) ([]groups.Key, error) {
	var keys []groups.Key
	pgs, err := in.fed.PodGroups.PodGroups(namespace).List(labels.Everything())
	if err != nil {
		return nil, err
	}
	for _, pg := range pgs {
		if r := pg.Spec.WorkloadRef; r != nil && r.WorkloadName == name {
			keys = append(keys, groups.Key{Kind: groups.PodGroupKind, Namespace: namespace, Name: pg.Name})
		}
	}
	cpgs, err := in.fed.CompositePodGroups.CompositePodGroups(namespace).List(labels.Everything())
	if err != nil {
		return nil, err
	}
	for _, cpg := range cpgs {
		if r := cpg.Spec.WorkloadRef; r != nil && r.WorkloadName == name {
			keys = append(keys, groups.Key{Kind: groups.CompositeKind, Namespace: namespace, Name: cpg.Name})
		}
	}
	return keys, nil
}

// explainKey explains the hierarchy group k belongs to. hint is the pod
// asked about, if any.
func (in *Inspector) explainKey(ctx context.Context, k groups.Key, infos []fwk.NodeInfo, hint *corev1.Pod) (*debugapi.Explanation, error) {
	tree, err := in.fed.TreeOf(k)
	if err != nil {
		// A missing group or parent, a cycle: nothing of it is planned.
		e := &debugapi.Explanation{Root: ref(k), Stage: debugapi.StageInvalid, Message: err.Error()}
		if entry, ok := in.fed.Entry(k); ok && entry.Exists {
			e.Groups = []debugapi.GroupState{in.groupState(&groups.Tree{Info: entry.Info})}
		}
		return e, nil
	}
	e := &debugapi.Explanation{Root: ref(tree.Key)}
	var walk func(*groups.Tree)
	walk = func(t *groups.Tree) {
		e.Groups = append(e.Groups, in.groupState(t))
		for _, ch := range t.Children {
			walk(ch)
		}
	}
	walk(tree)

	first := firstPending(tree)
	var all []*corev1.Pod
	for _, l := range leaves(tree) {
		all = append(all, live(l)...)
	}
	if first == nil && len(all) > 0 {
		first = all[0]
	}
	schedulerName := ""
	switch {
	case hint != nil:
		schedulerName = hint.Spec.SchedulerName
	case first != nil:
		schedulerName = first.Spec.SchedulerName
	}
	p, err := in.profileFor(schedulerName)
	if err != nil {
		e.Stage, e.Message = debugapi.StageInvalid, err.Error()
		return e, nil
	}
	e.Profile = p.name
	root := tree.Key
	if p.plugins.Plans != nil {
		if sp, ok := p.plugins.Plans.StoredPlan(root); ok {
			e.StoredPlan = storedPlan(sp)
		}
	}
	if p.plugins.Victims != nil {
		if ev, ok := p.plugins.Victims.LastEviction(root); ok {
			e.Preemption = &debugapi.Eviction{At: metav1.NewTime(ev.At), Victims: ev.Victims, Left: ev.Left}
		}
	}
	rootState := e.Groups[0]
	pending := 0
	for _, l := range leaves(tree) {
		for _, m := range l.Members {
			if m.State == groups.Pending {
				pending++
			}
		}
	}
	since := func(reason string) *metav1.Time {
		for _, c := range rootState.Conditions {
			if c.Type == v1alpha1.PodGroupSchedulable && c.Reason == reason {
				t := c.Since
				return &t
			}
		}
		return nil
	}

	f := facts{unit: unit(tree), pending: pending, min: rootState.Min, bound: rootState.Bound}
	f.invalid = invalid(tree)
	if f.invalid == "" && first != nil {
		f.invalid = gangcore.Disagreement(first, all, tree.Info, in.fed.PriorityClasses)
	}
	f.boundOK, _, _ = in.fed.Satisfied(root, groups.ByBound)
	var have, need int
	f.existingOK, have, need = in.fed.Satisfied(root, groups.ByExisting)
	if !f.existingOK {
		f.waiting = waitingMessage(in.fed.Cache, tree, have, need)
	}
	f.inPermit = in.waitingInPermit(p, tree)
	_, f.placed, f.placedNeed = in.fed.Satisfied(root, groups.ByPlaced)
	f.assumed = countState(tree, groups.Assumed)
	if ev := e.Preemption; ev != nil {
		f.evicted, f.evictionLeft = len(ev.Victims), len(ev.Left)
	}
	var plan bool
	e.Stage, e.Message, plan = classify(f)
	switch e.Stage {
	case debugapi.StageInvalid:
		e.Since = since(v1alpha1.ReasonInvalid)
	case debugapi.StageScheduled:
		// The condition turns True once: its transition is when.
		e.Since = since(v1alpha1.ReasonScheduled)
	case debugapi.StageWaitingForPods:
		e.Since = since(v1alpha1.ReasonWaitingForPods)
		if e.Since == nil {
			e.Since = rootState.Created
		}
	case debugapi.StageWaitingInPermit:
		if p.plugins.Permits != nil {
			if t, ok := p.plugins.Permits.PermitSince(root); ok {
				e.Since = timeOf(t)
			}
		}
	case debugapi.StagePreempting:
		e.Since = &e.Preemption.At
	}
	if !plan {
		return e, nil
	}
	a, err := in.assess(ctx, p, tree, first, infos, in.fed.PriorityClasses)
	if err != nil {
		return nil, err
	}
	e.Assessment = a
	if e.Stage == "" {
		e.Stage, e.Message = assessed(a)
		// A group condition keeps its transition time while only its
		// reason changes (waiting for pods, then unschedulable), so the
		// pending members' own PodScheduled=False is the better clock.
		if e.Since = pendingSince(tree); e.Since == nil {
			e.Since = since(v1alpha1.ReasonUnschedulable)
		}
	}
	return e, nil
}

// facts decide a hierarchy's stage. They are gathered from the group
// cache and the plugins; classify is kept apart so that every stage,
// including the short-lived ones, is tested.
type facts struct {
	unit string // "pods" or "child groups"
	// invalid: a definition the scheduler refuses, or members that
	// disagree with their group.
	invalid string
	// boundOK: the minimum is bound; existingOK: enough members exist,
	// else waiting says what is short.
	boundOK, existingOK bool
	waiting             string
	min, bound          int
	// inPermit members wait in Permit; placed of placedNeed are reserved
	// or bound; assumed are reserved (in Permit or binding).
	inPermit, placed, placedNeed, assumed int
	// evicted victims of the last preemption, evictionLeft of them still
	// there.
	evicted, evictionLeft int
	pending               int
}

// classify is the stage a hierarchy is at, in the order its members meet
// the scheduler's checks: validity, PreEnqueue's count, Permit, binding,
// preemption, then the plan. plan says an assessment is due: for a
// hierarchy still to be placed (stage "" until the assessment decides) or
// a scheduled one whose extra members wait.
func classify(f facts) (stage, msg string, plan bool) {
	switch {
	case f.invalid != "":
		return debugapi.StageInvalid, f.invalid, false
	case f.boundOK:
		msg = fmt.Sprintf("the group's minimum is bound: %d/%d %s", f.bound, f.min, f.unit)
		if f.pending > 0 {
			msg += fmt.Sprintf("; %d more members pending", f.pending)
		}
		return debugapi.StageScheduled, msg, f.pending > 0
	case !f.existingOK:
		return debugapi.StageWaitingForPods, f.waiting, false
	case f.inPermit > 0:
		return debugapi.StageWaitingInPermit, fmt.Sprintf("%d members reserved and waiting in Permit for the rest of the gang: %d/%d %s placed", f.inPermit, f.placed, f.placedNeed, f.unit), false
	case f.assumed > 0:
		return debugapi.StageBinding, fmt.Sprintf("the gang passed Permit: %d members being bound", f.assumed), false
	case f.evictionLeft > 0:
		return debugapi.StagePreempting, fmt.Sprintf("preempted %d pods for the group; waiting for %d of them to terminate", f.evicted, f.evictionLeft), false
	case f.pending == 0:
		return debugapi.StageScheduled, "no member is pending", false
	}
	return "", "", true
}

// assessed is the stage of a hierarchy to be placed, by what the planner
// and the victim search make of it.
func assessed(a *debugapi.Assessment) (stage, msg string) {
	switch {
	case a.Blocked != "":
		return debugapi.StageInfeasible, a.Blocked
	case a.Fits && a.Preemption != nil && a.Preemption.Possible:
		return debugapi.StageQueued, fmt.Sprintf("fits now: the scheduler places it on its next attempt, and the members beyond its minimum then preempt %d pods", len(a.Preemption.Victims))
	case a.Fits:
		return debugapi.StageQueued, "fits now: the scheduler places it on its next attempt"
	}
	msg = a.Infeasible.Reason
	if pr := a.Preemption; pr != nil {
		if pr.Possible {
			msg += fmt.Sprintf("; preempting %d pods would make it fit, which the scheduler does on its next attempt", len(pr.Victims))
		} else if pr.Reason != "" {
			msg += "; no preemption: " + pr.Reason
		}
	}
	return debugapi.StageInfeasible, msg
}

// invalid is the first group of the hierarchy whose definition cannot be
// scheduled.
func invalid(t *groups.Tree) string {
	if t.Invalid != "" {
		return t.Invalid
	}
	for _, ch := range t.Children {
		if msg := invalid(ch); msg != "" {
			return msg
		}
	}
	return ""
}

func unit(t *groups.Tree) string {
	if t.Key.Kind == groups.CompositeKind {
		return "child groups"
	}
	return "pods"
}

func countState(t *groups.Tree, s groups.State) int {
	n := 0
	for _, l := range leaves(t) {
		for _, m := range l.Members {
			if m.State == s {
				n++
			}
		}
	}
	return n
}

// waitingMessage is PreEnqueue's message for the first level short of
// members, as the group's condition carries it.
func waitingMessage(c *groups.Cache, t *groups.Tree, have, need int) string {
	for _, l := range leaves(t) {
		for _, m := range l.Members {
			if m.State == groups.Finished {
				continue
			}
			if ok, short, err := c.Quorum(m.Pod, groups.ByExisting); err == nil && !ok {
				if short.Leaf {
					return fmt.Sprintf("waiting for pods: %d/%d present (%s)", short.Have, short.Need, short.Key)
				}
				return fmt.Sprintf("waiting for child groups: %d/%d have their minimum pods (%s)", short.Have, short.Need, short.Key)
			}
		}
	}
	return fmt.Sprintf("waiting for pods: %d/%d %s present", have, need, unit(t))
}

// waitingInPermit counts the hierarchy's members waiting in Permit.
func (in *Inspector) waitingInPermit(p *profile, t *groups.Tree) int {
	members := map[string]bool{}
	for uid := range podNames(t) {
		members[uid] = true
	}
	n := 0
	p.real.IterateOverWaitingPods(func(wp fwk.WaitingPod) {
		if members[string(wp.GetPod().UID)] {
			n++
		}
	})
	return n
}

// pendingSince is when the earliest pending member was last found
// unschedulable, or created.
func pendingSince(t *groups.Tree) *metav1.Time {
	var first time.Time
	for _, l := range leaves(t) {
		for _, m := range l.Members {
			if m.State != groups.Pending {
				continue
			}
			at := m.Pod.CreationTimestamp.Time
			for _, c := range m.Pod.Status.Conditions {
				if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
					at = c.LastTransitionTime.Time
				}
			}
			if first.IsZero() || at.Before(first) {
				first = at
			}
		}
	}
	return timeOf(first)
}

// groupState describes one group of a hierarchy with its counts and its
// object's conditions.
func (in *Inspector) groupState(t *groups.Tree) debugapi.GroupState {
	s := stateIn(in.fed.Cache, t)
	s.Conditions = in.conditionsOf(t.Key)
	return s
}

// stateIn describes group t of cache c with its counts.
func stateIn(c *groups.Cache, t *groups.Tree) debugapi.GroupState {
	s := debugapi.GroupState{GroupRef: ref(t.Key), Policy: policy(t.Gang), TopologyKey: t.TopologyKey, Created: nanoTime(t.Created), Invalid: t.Invalid}
	if e, ok := c.Entry(t.Key); ok {
		s.Parent = e.ParentName
	}
	if t.Key.Kind == groups.CompositeKind {
		s.Min = t.MinGroupCount
		_, s.Present, _ = c.Satisfied(t.Key, groups.ByExisting)
		_, s.Placed, _ = c.Satisfied(t.Key, groups.ByPlaced)
		_, s.Bound, _ = c.Satisfied(t.Key, groups.ByBound)
	} else {
		s.Min = t.MinCount
		s.Present, s.Placed, s.Bound = t.Existing, t.Placed, t.Bound
		s.Pending = t.Existing - t.Placed
	}
	if !t.Gang {
		s.Min = 1
	}
	return s
}

// conditionsOf reads a group object's conditions from the scheduler's
// informers.
func (in *Inspector) conditionsOf(k groups.Key) []debugapi.Condition {
	var cs []metav1.Condition
	var err error
	switch {
	case k.Dialect == groups.Phalanx && k.Kind == groups.PodGroupKind:
		var pg *v1alpha1.PodGroup
		if pg, err = in.fed.PodGroups.PodGroups(k.Namespace).Get(k.Name); err == nil {
			cs = pg.Status.Conditions
		}
	case k.Dialect == groups.Phalanx && k.Kind == groups.CompositeKind:
		var cpg *v1alpha1.CompositePodGroup
		if cpg, err = in.fed.CompositePodGroups.CompositePodGroups(k.Namespace).Get(k.Name); err == nil {
			cs = cpg.Status.Conditions
		}
	case k.Dialect == groups.Native && k.Kind == groups.PodGroupKind:
		if l := in.fed.NativePodGroups(); l != nil {
			if pg, err := l.PodGroups(k.Namespace).Get(k.Name); err == nil {
				cs = pg.Status.Conditions
			}
		}
	case k.Dialect == groups.Native && k.Kind == groups.CompositeKind:
		if l := in.fed.NativeComposites(); l != nil {
			if cpg, err := l.CompositePodGroups(k.Namespace).Get(k.Name); err == nil {
				cs = cpg.Status.Conditions
			}
		}
	}
	if err != nil {
		return nil
	}
	return conditions(cs)
}

func storedPlan(sp pluginrt.StoredPlan) *debugapi.StoredPlan {
	out := &debugapi.StoredPlan{Made: metav1.NewTime(sp.Made)}
	if sp.Infeasible != nil {
		out.Infeasible = sp.Infeasible.Reason
	}
	if len(sp.Domains) > 0 {
		out.Domains = sp.Domains
	}
	for _, node := range sp.Assignments {
		if out.Nodes == nil {
			out.Nodes = map[string]int{}
		}
		out.Nodes[node]++
	}
	return out
}
