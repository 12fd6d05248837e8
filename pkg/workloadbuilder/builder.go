package workloadbuilder

import (
	"errors"
	"fmt"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
)

// BuildOptions says what Workload to build and what the controller accepts.
type BuildOptions struct {
	// Name and Namespace identify the Workload that BuildWorkload returns;
	// group objects are named <Name>-<template> in Namespace.
	Name      string
	Namespace string

	// Owner is the controller object (a Job, say). BuildWorkload sets it as
	// the Workload's only ownerReference and derives spec.controllerRef from
	// it; NewPodGroup and friends set it as the groups' ownerReference. Nil
	// leaves the objects unowned, which suits a Workload authored by hand.
	// A Workload controller materialising groups of an existing Workload
	// passes WorkloadOwnerReference(workload) so the groups die with it.
	Owner *metav1.OwnerReference

	// AllowedPolicies and AllowedDisruptionModes are the options the
	// controller supports. Validate rejects anything else, so a new option in
	// the building blocks stays denied until a controller opts in. An empty
	// list allows nothing; an item with no policy resolves to BasicPolicy and
	// is checked as such.
	AllowedPolicies        []PolicyKind
	AllowedDisruptionModes []DisruptionModeKind

	// DisableDeclarativeValidation skips Validate's structural layer, for a
	// controller whose API server already validated the embedded blocks. The
	// controller-policy layer still runs.
	DisableDeclarativeValidation bool
}

// Builder turns a WorkloadItem tree into a Workload and its group objects.
// It caches what it compiles and is not safe for concurrent use.
type Builder struct {
	root *WorkloadItem
	opts BuildOptions

	// workload is the compiled (or, from NewBuilderFromExistingWorkload,
	// the supplied) Workload. Once set it is never recompiled, so every group
	// made by this Builder comes from one and the same set of templates.
	workload *v1alpha1.Workload
	// existing marks a Builder made from a stored Workload: there is no item
	// tree to validate or compile.
	existing bool
	// templates indexes the workload's templates by name, built on first use.
	templates *templateIndex
}

// NewBuilder returns a Builder for the tree rooted at root. A leaf root
// compiles to a single podGroupTemplate; a root with children compiles to a
// single compositePodGroupTemplate.
func NewBuilder(root *WorkloadItem, opts BuildOptions) *Builder {
	return &Builder{root: root, opts: opts}
}

// NewBuilderFromExistingWorkload returns a Builder over a Workload that was
// compiled (or hand-written) earlier and already passed the API server. It
// neither re-validates nor recompiles: BuildWorkload returns w itself and the
// group constructors read w's templates. Validate reports an internal error,
// as there is no item tree to check.
func NewBuilderFromExistingWorkload(w *v1alpha1.Workload, opts BuildOptions) (*Builder, error) {
	if w == nil {
		return nil, errors.New("workloadbuilder: NewBuilderFromExistingWorkload needs a Workload, got nil")
	}
	return &Builder{opts: opts, workload: w, existing: true}, nil
}

// BuildWorkload compiles the tree into a Workload on the first call and
// returns that same object on later calls without recompiling (Adjust
// callbacks do not run again). Callers must not modify the returned object;
// DeepCopy it first. BuildWorkload does not validate: call Validate first.
func (b *Builder) BuildWorkload() (*v1alpha1.Workload, error) {
	if b.workload != nil {
		return b.workload, nil
	}
	w, err := b.compile()
	if err != nil {
		return nil, err
	}
	b.workload = w
	return w, nil
}

// WorkloadOwnerReference returns a controller reference to w, for
// BuildOptions.Owner when the groups made from w should be owned by it.
func WorkloadOwnerReference(w *v1alpha1.Workload) metav1.OwnerReference {
	return *metav1.NewControllerRef(w, v1alpha1.SchemeGroupVersion.WithKind("Workload"))
}

// compile resolves the tree and turns it into a Workload. It checks only what
// it needs to produce well-typed templates (names, depth, resolved counts);
// the rest is Validate's job.
func (b *Builder) compile() (*v1alpha1.Workload, error) {
	tree, err := resolveTree(b.root)
	if err != nil {
		return nil, fmt.Errorf("compile workload %q: %w", b.opts.Name, err)
	}
	if err := checkCompilable(tree); err != nil {
		return nil, fmt.Errorf("compile workload %q: %w", b.opts.Name, err)
	}

	w := &v1alpha1.Workload{
		ObjectMeta: metav1.ObjectMeta{Name: b.opts.Name, Namespace: b.opts.Namespace},
	}
	if tree.composite {
		tmpl, err := compileLevel1(tree)
		if err != nil {
			return nil, fmt.Errorf("compile workload %q: %w", b.opts.Name, err)
		}
		w.Spec.CompositePodGroupTemplates = []v1alpha1.CompositePodGroupTemplate{tmpl}
	} else {
		tmpl, err := compileLeaf(tree)
		if err != nil {
			return nil, fmt.Errorf("compile workload %q: %w", b.opts.Name, err)
		}
		w.Spec.PodGroupTemplates = []v1alpha1.PodGroupTemplate{tmpl}
	}

	if owner := b.opts.Owner; owner != nil {
		gv, err := schema.ParseGroupVersion(owner.APIVersion)
		if err != nil {
			return nil, fmt.Errorf("compile workload %q: owner apiVersion %q: %w", b.opts.Name, owner.APIVersion, err)
		}
		w.OwnerReferences = []metav1.OwnerReference{*owner.DeepCopy()}
		w.Spec.ControllerRef = &v1alpha1.TypedLocalObjectReference{
			APIGroup: gv.Group,
			Kind:     owner.Kind,
			Name:     owner.Name,
		}
	}
	return w, nil
}

// checkCompilable rejects trees that cannot be expressed in the Workload
// types at all, so BuildWorkload fails loudly even when the controller
// skipped Validate.
func checkCompilable(tree *node) error {
	seen := map[string]bool{}
	var errs []error
	tree.walk(func(n *node) {
		switch {
		case n.item.Name == "":
			errs = append(errs, fmt.Errorf("an item at %s has no name", n.item.Path))
		case seen[n.item.Name]:
			errs = append(errs, fmt.Errorf("template name %q is used twice; names must be unique across the Workload", n.item.Name))
		}
		seen[n.item.Name] = true
		if n.composite && len(n.children) == 0 {
			errs = append(errs, fmt.Errorf("composite template %q has no child templates", n.item.Name))
		}
		// Deeper composites sit under this one and need no error of their own.
		if n.composite && n.level == v1alpha1.MaxTreeDepth {
			errs = append(errs, fmt.Errorf("template %q: %s", n.item.Name, MsgMaxDepth))
		}
	})
	return errors.Join(errs...)
}

func compileLeaf(n *node) (v1alpha1.PodGroupTemplate, error) {
	cfg := n.cfg
	tmpl := v1alpha1.PodGroupTemplate{
		Name:              n.item.Name,
		ResourceClaims:    slices.Clone(cfg.ResourceClaims),
		PriorityClassName: cfg.PriorityClassName,
		Priority:          cfg.Priority,
		PreemptionPolicy:  cfg.PreemptionPolicy,
	}
	switch cfg.Policy {
	case BasicPolicy:
		tmpl.SchedulingPolicy.Basic = &v1alpha1.BasicSchedulingPolicy{}
	case GangPolicy:
		if cfg.MinCount == nil {
			return tmpl, fmt.Errorf("template %q: gang policy has no minCount after defaults and adjustments", n.item.Name)
		}
		tmpl.SchedulingPolicy.Gang = &v1alpha1.GangSchedulingPolicy{MinCount: *cfg.MinCount}
	default:
		return tmpl, fmt.Errorf("template %q: unknown scheduling policy %q", n.item.Name, cfg.Policy)
	}
	if len(cfg.Topology) > 0 || len(cfg.PreferredTopology) > 0 {
		tmpl.SchedulingConstraints = &v1alpha1.PodGroupSchedulingConstraints{
			Topology:          slices.Clone(cfg.Topology),
			PreferredTopology: slices.Clone(cfg.PreferredTopology),
		}
	}
	switch cfg.DisruptionMode {
	case "":
	case SingleMode:
		tmpl.DisruptionMode = &v1alpha1.DisruptionMode{Single: &v1alpha1.SingleDisruptionMode{}}
	case AllMode:
		tmpl.DisruptionMode = &v1alpha1.DisruptionMode{All: &v1alpha1.AllDisruptionMode{}}
	default:
		return tmpl, fmt.Errorf("template %q: unknown disruption mode %q", n.item.Name, cfg.DisruptionMode)
	}
	return tmpl, nil
}

// compileFields compiles what every composite level shares: its own fields
// and its leaf children. Composite children are left to the level-specific
// functions, because each level has its own Go type.
func compileFields(n *node) (v1alpha1.CompositePodGroupTemplateFields, error) {
	cfg := n.cfg
	f := v1alpha1.CompositePodGroupTemplateFields{
		Name:              n.item.Name,
		PriorityClassName: cfg.PriorityClassName,
		Priority:          cfg.Priority,
		PreemptionPolicy:  cfg.PreemptionPolicy,
	}
	switch cfg.Policy {
	case BasicPolicy:
		f.SchedulingPolicy.Basic = &v1alpha1.CompositeBasicSchedulingPolicy{}
	case GangPolicy:
		if cfg.MinCount == nil {
			return f, fmt.Errorf("template %q: gang policy has no minGroupCount after defaults and adjustments", n.item.Name)
		}
		f.SchedulingPolicy.Gang = &v1alpha1.CompositeGangSchedulingPolicy{MinGroupCount: *cfg.MinCount}
	default:
		return f, fmt.Errorf("template %q: unknown scheduling policy %q", n.item.Name, cfg.Policy)
	}
	if len(cfg.Topology) > 0 {
		f.SchedulingConstraints = &v1alpha1.CompositePodGroupSchedulingConstraints{Topology: slices.Clone(cfg.Topology)}
	}
	switch cfg.DisruptionMode {
	case "":
	case SingleMode:
		f.DisruptionMode = &v1alpha1.CompositeDisruptionMode{Single: &v1alpha1.SingleCompositeDisruptionMode{}}
	case AllMode:
		f.DisruptionMode = &v1alpha1.CompositeDisruptionMode{All: &v1alpha1.AllCompositeDisruptionMode{}}
	default:
		return f, fmt.Errorf("template %q: unknown disruption mode %q", n.item.Name, cfg.DisruptionMode)
	}
	if len(cfg.PreferredTopology) > 0 {
		return f, fmt.Errorf("template %q: a composite template cannot hold preferred topology levels", n.item.Name)
	}
	if len(cfg.ResourceClaims) > 0 {
		return f, fmt.Errorf("template %q: a composite template cannot hold resource claims", n.item.Name)
	}
	for _, c := range n.children {
		if c.composite {
			continue
		}
		leaf, err := compileLeaf(c)
		if err != nil {
			return f, err
		}
		f.PodGroupTemplates = append(f.PodGroupTemplates, leaf)
	}
	return f, nil
}

func compileLevel1(n *node) (v1alpha1.CompositePodGroupTemplate, error) {
	f, err := compileFields(n)
	t := v1alpha1.CompositePodGroupTemplate{CompositePodGroupTemplateFields: f}
	if err != nil {
		return t, err
	}
	for _, c := range compositeChildren(n) {
		child, err := compileLevel2(c)
		if err != nil {
			return t, err
		}
		t.CompositePodGroupTemplates = append(t.CompositePodGroupTemplates, child)
	}
	return t, nil
}

func compileLevel2(n *node) (v1alpha1.CompositePodGroupTemplateLevel2, error) {
	f, err := compileFields(n)
	t := v1alpha1.CompositePodGroupTemplateLevel2{CompositePodGroupTemplateFields: f}
	if err != nil {
		return t, err
	}
	for _, c := range compositeChildren(n) {
		child, err := compileLevel3(c)
		if err != nil {
			return t, err
		}
		t.CompositePodGroupTemplates = append(t.CompositePodGroupTemplates, child)
	}
	return t, nil
}

func compileLevel3(n *node) (v1alpha1.CompositePodGroupTemplateLevel3, error) {
	// Level 3 takes no composite children: checkCompilable rejected any.
	f, err := compileFields(n)
	return v1alpha1.CompositePodGroupTemplateLevel3{CompositePodGroupTemplateFields: f}, err
}

func compositeChildren(n *node) []*node {
	var out []*node
	for _, c := range n.children {
		if c.composite {
			out = append(out, c)
		}
	}
	return out
}
