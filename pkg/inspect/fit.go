package inspect

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	schedv1alpha3 "k8s.io/api/scheduling/v1alpha3"
	schedv1beta1 "k8s.io/api/scheduling/v1beta1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	schedulinglisters "k8s.io/client-go/listers/scheduling/v1"
	xv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	v1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
	"github.com/phalanx-sched/phalanx/pkg/debugapi"
	"github.com/phalanx-sched/phalanx/pkg/gangcore"
	"github.com/phalanx-sched/phalanx/pkg/groups"
)

// hypothetical is a fit request read into a group cache of its own, as the
// scheduler's would hold it once the objects were created.
type hypothetical struct {
	cache *groups.Cache
	keys  []groups.Key
	pods  []*corev1.Pod
	// classes are the request's PriorityClasses, which its groups and
	// pods may name as if they were created with them.
	classes map[string]*schedulingv1.PriorityClass
	// claims are the ResourceClaims the request brings or its pods would
	// get from templates, and templates the request's
	// ResourceClaimTemplates, by namespace/name (claims.go).
	claims    map[string]*resourceapi.ResourceClaim
	templates map[string]*resourceapi.ResourceClaimTemplate
}

func decodeFit(req *debugapi.FitRequest, lookup templateLookup) (*hypothetical, error) {
	h := &hypothetical{cache: groups.NewCache(), classes: map[string]*schedulingv1.PriorityClass{},
		claims: map[string]*resourceapi.ResourceClaim{}, templates: map[string]*resourceapi.ResourceClaimTemplate{}}
	// Whatever the cluster serves, the objects in the request exist in it.
	for _, d := range groups.Dialects {
		h.cache.SetServed(d, true)
	}
	for i, raw := range req.Objects {
		var tm metav1.TypeMeta
		if err := json.Unmarshal(raw, &tm); err != nil {
			return nil, badRequest("objects[%d]: %v", i, err)
		}
		var key groups.Key
		var spec groups.Spec
		var meta *metav1.ObjectMeta
		switch tm.GroupVersionKind().GroupKind().String() {
		case "PodGroup.scheduling.phalanx.dev":
			o := &v1alpha1.PodGroup{}
			if err := json.Unmarshal(raw, o); err != nil {
				return nil, badRequest("objects[%d]: %v", i, err)
			}
			meta, key, spec = &o.ObjectMeta, groups.Key{Dialect: groups.Phalanx, Kind: groups.PodGroupKind}, groups.SpecOfPodGroup(o)
		case "CompositePodGroup.scheduling.phalanx.dev":
			o := &v1alpha1.CompositePodGroup{}
			if err := json.Unmarshal(raw, o); err != nil {
				return nil, badRequest("objects[%d]: %v", i, err)
			}
			meta, key, spec = &o.ObjectMeta, groups.Key{Dialect: groups.Phalanx, Kind: groups.CompositeKind}, groups.SpecOfComposite(o)
		case "PodGroup.scheduling.k8s.io":
			o := &schedv1beta1.PodGroup{}
			if err := json.Unmarshal(raw, o); err != nil {
				return nil, badRequest("objects[%d]: %v", i, err)
			}
			meta, key, spec = &o.ObjectMeta, groups.Key{Dialect: groups.Native, Kind: groups.PodGroupKind}, groups.SpecOfNativePodGroup(o)
		case "CompositePodGroup.scheduling.k8s.io":
			o := &schedv1alpha3.CompositePodGroup{}
			if err := json.Unmarshal(raw, o); err != nil {
				return nil, badRequest("objects[%d]: %v", i, err)
			}
			meta, key, spec = &o.ObjectMeta, groups.Key{Dialect: groups.Native, Kind: groups.CompositeKind}, groups.SpecOfNativeComposite(o)
		case "PodGroup.scheduling.x-k8s.io":
			o := &xv1alpha1.PodGroup{}
			if err := json.Unmarshal(raw, o); err != nil {
				return nil, badRequest("objects[%d]: %v", i, err)
			}
			meta, key, spec = &o.ObjectMeta, groups.Key{Dialect: groups.Coscheduling, Kind: groups.PodGroupKind}, groups.SpecOfXPodGroup(o)
		case "PriorityClass.scheduling.k8s.io":
			pc := &schedulingv1.PriorityClass{}
			if err := json.Unmarshal(raw, pc); err != nil {
				return nil, badRequest("objects[%d]: %v", i, err)
			}
			if pc.Name == "" {
				return nil, badRequest("objects[%d]: a PriorityClass needs metadata.name", i)
			}
			if _, dup := h.classes[pc.Name]; dup {
				return nil, badRequest("PriorityClass %s appears twice", pc.Name)
			}
			h.classes[pc.Name] = pc
			continue
		case "ResourceClaim.resource.k8s.io":
			c := &resourceapi.ResourceClaim{}
			if err := json.Unmarshal(raw, c); err != nil {
				return nil, badRequest("objects[%d]: %v", i, err)
			}
			if c.Namespace == "" {
				c.Namespace = req.Namespace
			}
			if c.UID == "" {
				c.UID = types.UID(fmt.Sprintf("fit-%d-claim", i))
			}
			if _, dup := h.claims[c.Namespace+"/"+c.Name]; dup {
				return nil, badRequest("ResourceClaim %s/%s appears twice", c.Namespace, c.Name)
			}
			h.claims[c.Namespace+"/"+c.Name] = c
			continue
		case "ResourceClaimTemplate.resource.k8s.io":
			tm := &resourceapi.ResourceClaimTemplate{}
			if err := json.Unmarshal(raw, tm); err != nil {
				return nil, badRequest("objects[%d]: %v", i, err)
			}
			if tm.Namespace == "" {
				tm.Namespace = req.Namespace
			}
			if _, dup := h.templates[tm.Namespace+"/"+tm.Name]; dup {
				return nil, badRequest("ResourceClaimTemplate %s/%s appears twice", tm.Namespace, tm.Name)
			}
			h.templates[tm.Namespace+"/"+tm.Name] = tm
			continue
		case "Pod":
			pod := &corev1.Pod{}
			if err := json.Unmarshal(raw, pod); err != nil {
				return nil, badRequest("objects[%d]: %v", i, err)
			}
			if pod.Namespace == "" {
				pod.Namespace = req.Namespace
			}
			if pod.Spec.NodeName != "" {
				return nil, badRequest("pod %s names node %s: fit places pending pods", pod.Name, pod.Spec.NodeName)
			}
			// The API server would give each pod a UID of its own; members
			// of a plan are told apart by it.
			pod.UID = types.UID(fmt.Sprintf("fit-%d-%s", i, pod.UID))
			h.pods = append(h.pods, pod)
			continue
		default:
			return nil, badRequest("objects[%d]: fit reads PodGroups, CompositePodGroups, PriorityClasses, ResourceClaims, ResourceClaimTemplates and Pods, not %s %s", i, tm.APIVersion, tm.Kind)
		}
		if meta.Namespace == "" {
			meta.Namespace = req.Namespace
		}
		key.Namespace, key.Name = meta.Namespace, meta.Name
		if _, ok := h.cache.Get(key); ok {
			return nil, badRequest("%s appears twice", key)
		}
		h.cache.SetGroup(key, spec)
		h.keys = append(h.keys, key)
	}
	if err := h.podClaims(lookup); err != nil {
		return nil, err
	}
	for _, pod := range h.pods {
		// What the Priority admission plugin would set once the class
		// exists: the API server could not, as it does not exist yet.
		if pc := h.classes[pod.Spec.PriorityClassName]; pc != nil && pod.Spec.Priority == nil {
			pod.Spec.Priority = &pc.Value
			policy := corev1.PreemptLowerPriority
			if pc.PreemptionPolicy != nil {
				policy = *pc.PreemptionPolicy
			}
			pod.Spec.PreemptionPolicy = &policy
		}
		h.cache.AddOrUpdatePod(pod)
	}
	return h, nil
}

// priorityClasses resolves the request's priorities: its own classes, then
// the cluster's.
func (h *hypothetical) priorityClasses(cluster schedulinglisters.PriorityClassLister) schedulinglisters.PriorityClassLister {
	if len(h.classes) == 0 {
		return cluster
	}
	return requestClasses{own: h.classes, cluster: cluster}
}

// requestClasses lays a fit request's PriorityClasses over the cluster's.
type requestClasses struct {
	own     map[string]*schedulingv1.PriorityClass
	cluster schedulinglisters.PriorityClassLister
}

func (r requestClasses) List(sel labels.Selector) ([]*schedulingv1.PriorityClass, error) {
	var out []*schedulingv1.PriorityClass
	if r.cluster != nil {
		all, err := r.cluster.List(sel)
		if err != nil {
			return nil, err
		}
		for _, pc := range all {
			if _, shadowed := r.own[pc.Name]; !shadowed {
				out = append(out, pc)
			}
		}
	}
	for _, pc := range r.own {
		if sel.Matches(labels.Set(pc.Labels)) {
			out = append(out, pc)
		}
	}
	return out, nil
}

func (r requestClasses) Get(name string) (*schedulingv1.PriorityClass, error) {
	if pc, ok := r.own[name]; ok {
		return pc, nil
	}
	if r.cluster == nil {
		return nil, apierrors.NewNotFound(schedulingv1.Resource("priorityclasses"), name)
	}
	return r.cluster.Get(name)
}

// root finds the one hierarchy the request describes.
func (h *hypothetical) root() (groups.Key, error) {
	roots := map[groups.Key]bool{}
	add := func(k groups.Key, what string) error {
		if _, err := h.cache.TreeOf(k); err != nil {
			return badRequest("%s: %v (fit asks about new groups: put every group of the hierarchy in the file)", what, err)
		}
		r, _ := h.cache.RootOf(k)
		roots[r] = true
		return nil
	}
	for _, k := range h.keys {
		if err := add(k, k.String()); err != nil {
			return groups.Key{}, err
		}
	}
	for _, pod := range h.pods {
		a, grouped, err := groups.Attach(pod)
		if err != nil {
			return groups.Key{}, badRequest("pod %s: %v", pod.Name, err)
		}
		if !grouped {
			return groups.Key{}, badRequest("pod %s belongs to no group: fit answers for groups", pod.Name)
		}
		if err := add(a.Key, "pod "+pod.Name); err != nil {
			return groups.Key{}, err
		}
	}
	if len(roots) != 1 {
		var names []string
		for r := range roots {
			names = append(names, r.String())
		}
		sort.Strings(names)
		if len(names) == 0 {
			return groups.Key{}, badRequest("the request holds no group")
		}
		return groups.Key{}, badRequest("the request holds %d hierarchies (%s): ask about one at a time", len(names), strings.Join(names, ", "))
	}
	for r := range roots {
		return r, nil
	}
	return groups.Key{}, nil
}

// Fit answers whether the hierarchy in req would fit if it were created
// now: the checks and plan of its first scheduling attempt, and the victim
// search that attempt would make if it did not fit.
func (in *Inspector) Fit(ctx context.Context, req *debugapi.FitRequest) (*debugapi.FitAnswer, error) {
	h, err := decodeFit(req, in.templates(ctx))
	if err != nil {
		return nil, err
	}
	rootKey, err := h.root()
	if err != nil {
		return nil, err
	}
	tree, err := h.cache.TreeOf(rootKey)
	if err != nil {
		return nil, badRequest("%v", err)
	}
	first := firstPending(tree)
	schedulerName := ""
	if first != nil {
		schedulerName = first.Spec.SchedulerName
	}
	p, err := in.profileFor(schedulerName)
	if err != nil {
		return nil, badRequest("%v", err)
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.overlay != nil {
		in.overlay.claims = h.claims
		defer func() { in.overlay.claims = nil }()
	}
	infos, err := in.refresh(ctx)
	if err != nil {
		return nil, err
	}
	out := &debugapi.FitAnswer{TypeMeta: typeMeta("FitAnswer"), Answer: in.answer(len(infos)), Root: ref(rootKey)}
	out.Profile = p.name
	var walk func(*groups.Tree)
	walk = func(t *groups.Tree) {
		out.Groups = append(out.Groups, stateIn(h.cache, t))
		for _, ch := range t.Children {
			walk(ch)
		}
	}
	walk(tree)

	blocked := func(msg string) (*debugapi.FitAnswer, error) {
		out.Verdict, out.Message, out.Assessment.Blocked = debugapi.VerdictBlocked, msg, msg
		return out, nil
	}
	if msg := invalid(tree); msg != "" {
		return blocked(msg)
	}
	if first == nil {
		return blocked("no pod of the hierarchy is pending: add its pods (or a Job or Deployment whose template makes them) to the file")
	}
	classes := h.priorityClasses(in.fed.PriorityClasses)
	if msg := gangcore.Disagreement(first, h.pods, tree.Info, classes); msg != "" {
		return blocked(msg)
	}
	if ok, have, need := h.cache.Satisfied(rootKey, groups.ByExisting); !ok {
		return blocked(waitingMessage(h.cache, tree, have, need) + ": the members would wait for the rest before the scheduler tries them")
	}
	a, err := in.assess(ctx, p, tree, first, infos, classes)
	if err != nil {
		return nil, err
	}
	out.Assessment = *a
	switch {
	case a.Blocked != "":
		out.Verdict, out.Message = debugapi.VerdictBlocked, a.Blocked
	case a.Fits && a.Preemption != nil && a.Preemption.Possible:
		out.Verdict = debugapi.VerdictFitsWithPreemption
		out.Message = fmt.Sprintf("its minimum fits now (%s); the members beyond it then preempt %d pods: %s",
			fitsMessage(a.Placement, len(h.pods)), len(a.Preemption.Victims), fitsMessage(a.Preemption.Placement, len(h.pods)))
	case a.Fits:
		out.Verdict, out.Message = debugapi.VerdictFits, fitsMessage(a.Placement, len(h.pods))
	case a.Preemption != nil && a.Preemption.Possible:
		out.Verdict = debugapi.VerdictFitsWithPreemption
		out.Message = fmt.Sprintf("fits after preempting %d pods: %s", len(a.Preemption.Victims), fitsMessage(a.Preemption.Placement, len(h.pods)))
	default:
		out.Verdict, out.Message = debugapi.VerdictDoesNotFit, a.Infeasible.Reason
		if a.Preemption != nil && a.Preemption.Reason != "" {
			out.Message += "; no preemption: " + a.Preemption.Reason
		}
	}
	return out, nil
}

func fitsMessage(p *debugapi.Placement, pods int) string {
	nodes := map[string]bool{}
	for _, n := range p.Pods {
		nodes[n] = true
	}
	msg := fmt.Sprintf("%d of %d pods placed on %d nodes", len(p.Pods), pods, len(nodes))
	var ds []string
	for _, d := range p.Domains {
		ds = append(ds, d)
	}
	sort.Strings(ds)
	if len(ds) > 0 {
		msg += " in " + strings.Join(ds, ", ")
	}
	return msg
}
