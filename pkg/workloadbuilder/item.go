package workloadbuilder

import (
	"fmt"
	"maps"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
)

// WorkloadItem is one node of a controller's logical workload. A leaf (no
// children) compiles to a PodGroupTemplate; an item with children compiles to
// a CompositePodGroupTemplate holding its children. An item that sets a
// composite building block but has no children is a composite with no
// children, which Validate rejects.
type WorkloadItem struct {
	// Name becomes the template name, and so the group name
	// <workload>-<Name>. It must be a DNS label, unique in the whole tree.
	Name string

	// NamePath is where Name came from in the controller's API, for errors
	// about the name. Nil means Path.name.
	NamePath *field.Path

	// Path is where this item's scheduling fields live in the controller's
	// API (for a Job, say, spec.scheduling). Blocks whose own Path is nil sit
	// under it by their JSON names: schedulingPolicy, schedulingConstraints,
	// disruptionMode, resourceClaims; the priority fields sit directly on it.
	Path *field.Path

	// ChildrenPath is where Children are listed in the controller's API (for
	// a JobSet-like API, spec.replicatedJobs), for errors about the list as a
	// whole. Nil means Path.podGroupTemplates or Path.compositePodGroupTemplates.
	ChildrenPath *field.Path

	// Defaults is the controller's configuration for whatever the user left
	// unset. For a gang, Defaults.MinCount is the usual place for a Job's
	// parallelism: it fills in a user's `gang: {}`.
	Defaults *Config

	// Input is what the user wrote, with where they wrote it.
	Input Input

	// Adjust runs, in order, on the configuration resolved from the parent's
	// priority, Defaults and Input, and may change it before it is validated
	// by the controller-policy layer and compiled. It receives a private
	// copy: changes never leak into Defaults or Input.
	Adjust []AdjustFunc

	// Children are the item's sub-groups, in template order.
	Children []*WorkloadItem
}

// AdjustFunc tweaks a resolved configuration, for rules that need more than
// a static default (e.g. "minCount defaults to parallelism unless the Job is
// elastic").
type AdjustFunc func(*Config)

// Input holds the user's building blocks for one item. The PodGroup blocks
// belong on leaves and the Composite blocks on items with children; Validate
// rejects a PodGroup block on a composite item. Priority fits both.
type Input struct {
	// Leaf blocks. Default paths: Path.schedulingPolicy,
	// Path.schedulingConstraints, Path.disruptionMode, Path.resourceClaims.
	SchedulingPolicy      Block[*WorkloadPodGroupSchedulingPolicy]
	SchedulingConstraints Block[*WorkloadPodGroupSchedulingConstraints]
	DisruptionMode        Block[*WorkloadPodGroupDisruptionMode]
	ResourceClaims        Block[[]WorkloadPodGroupResourceClaim]

	// Composite blocks, at the same default paths as their leaf twins.
	CompositeSchedulingPolicy      Block[*WorkloadCompositePodGroupSchedulingPolicy]
	CompositeSchedulingConstraints Block[*WorkloadCompositePodGroupSchedulingConstraints]
	CompositeDisruptionMode        Block[*WorkloadCompositePodGroupDisruptionMode]

	// Priority's fields default to Path.priorityClassName, Path.priority
	// and Path.preemptionPolicy: a pod spec keeps them flat, not in a block.
	Priority Block[*WorkloadPriority]
}

// Block is one building block as the user wrote it, and where.
type Block[T any] struct {
	// Value is the user's data. Its zero value (nil) means the user did not
	// set the block, and the item's Defaults apply.
	Value T
	// Path locates the block in the controller's API. Nil means the block's
	// conventional place under the item's Path.
	Path *field.Path
	// FieldPaths relocates single fields of the block, keyed by their path
	// relative to the block as field.Path prints it: "gang.minCount",
	// "gang.minGroupCount", "topology[0].key", "[1].name" (resource claims),
	// "priorityClassName". Use it when a field came from elsewhere, such as
	// an annotation, so errors name the place the user actually edited.
	FieldPaths map[string]*field.Path
}

// At returns a block holding value, located at path.
func At[T any](path *field.Path, value T) Block[T] {
	return Block[T]{Value: value, Path: path}
}

// WithFieldPath returns a copy of b that reports errors about the field rel
// (relative to the block, e.g. "gang.minCount") at path.
func (b Block[T]) WithFieldPath(rel string, path *field.Path) Block[T] {
	fieldPaths := maps.Clone(b.FieldPaths)
	if fieldPaths == nil {
		fieldPaths = map[string]*field.Path{}
	}
	fieldPaths[rel] = path
	b.FieldPaths = fieldPaths
	return b
}

// Config is the resolved configuration of one item, the same shape for a
// leaf and a composite so that Defaults and Adjust need not care which they
// serve.
// +k8s:deepcopy-gen=true
type Config struct {
	// Policy is the scheduling policy; "" resolves to BasicPolicy.
	Policy PolicyKind
	// MinCount is a leaf gang's minCount or a composite gang's
	// minGroupCount. It is consulted only when Policy is GangPolicy, so a
	// default may carry it for a user who later picks `gang: {}`.
	MinCount *int32
	// Topology holds at most one constraint; empty means none.
	Topology []v1alpha1.TopologyConstraint
	// PreferredTopology are a leaf's soft levels, narrowest first; empty
	// means none.
	PreferredTopology []v1alpha1.TopologyConstraint
	// DisruptionMode "" leaves the field unset (the scheduler's default is
	// single).
	DisruptionMode DisruptionModeKind
	// ResourceClaims belong on leaves only.
	ResourceClaims    []v1alpha1.PodGroupResourceClaim
	PriorityClassName string
	Priority          *int32
	PreemptionPolicy  *v1alpha1.PreemptionPolicy
}

// overlay copies every field that src sets onto c. Each source (inherited
// priority, Defaults, Input) says only what it knows, so the merge is field
// by field rather than block by block.
func (c *Config) overlay(src *Config) {
	if src == nil {
		return
	}
	src = src.DeepCopy()
	if src.Policy != "" {
		c.Policy = src.Policy
	}
	if src.MinCount != nil {
		c.MinCount = src.MinCount
	}
	if len(src.Topology) > 0 {
		c.Topology = src.Topology
	}
	if len(src.PreferredTopology) > 0 {
		c.PreferredTopology = src.PreferredTopology
	}
	if src.DisruptionMode != "" {
		c.DisruptionMode = src.DisruptionMode
	}
	if len(src.ResourceClaims) > 0 {
		c.ResourceClaims = src.ResourceClaims
	}
	if src.PriorityClassName != "" {
		c.PriorityClassName = src.PriorityClassName
	}
	if src.Priority != nil {
		c.Priority = src.Priority
	}
	if src.PreemptionPolicy != nil {
		c.PreemptionPolicy = src.PreemptionPolicy
	}
}

// hasCompositeBlocks reports whether the user gave a group-of-groups block.
func (it *WorkloadItem) hasCompositeBlocks() bool {
	in := &it.Input
	return in.CompositeSchedulingPolicy.Value != nil ||
		in.CompositeSchedulingConstraints.Value != nil ||
		in.CompositeDisruptionMode.Value != nil
}

// isComposite reports whether the item compiles to a composite template.
func (it *WorkloadItem) isComposite() bool {
	return len(it.Children) > 0 || it.hasCompositeBlocks()
}

// inputConfig maps the user's blocks onto a Config. Only blocks matching the
// item's kind count, and a malformed union (none or both members) states
// nothing: the structural layer reports it, and resolution falls back to the
// default instead of guessing.
func (it *WorkloadItem) inputConfig(composite bool) *Config {
	in := &it.Input
	cfg := &Config{}
	if composite {
		if p := in.CompositeSchedulingPolicy.Value; p != nil {
			cfg.Policy = p.policyKind()
			if cfg.Policy == GangPolicy {
				cfg.MinCount = p.Gang.MinGroupCount
			}
		}
		if c := in.CompositeSchedulingConstraints.Value; c != nil {
			cfg.Topology = c.Topology
		}
		cfg.DisruptionMode = in.CompositeDisruptionMode.Value.modeKind()
	} else {
		if p := in.SchedulingPolicy.Value; p != nil {
			cfg.Policy = p.policyKind()
			if cfg.Policy == GangPolicy {
				cfg.MinCount = p.Gang.MinCount
			}
		}
		if c := in.SchedulingConstraints.Value; c != nil {
			cfg.Topology = c.Topology
			cfg.PreferredTopology = c.PreferredTopology
		}
		cfg.DisruptionMode = in.DisruptionMode.Value.modeKind()
		for _, claim := range in.ResourceClaims.Value {
			cfg.ResourceClaims = append(cfg.ResourceClaims, v1alpha1.PodGroupResourceClaim{
				Name:                      claim.Name,
				ResourceClaimName:         claim.ResourceClaimName,
				ResourceClaimTemplateName: claim.ResourceClaimTemplateName,
			})
		}
	}
	if p := in.Priority.Value; p != nil {
		cfg.PriorityClassName = p.PriorityClassName
		cfg.Priority = p.Priority
		cfg.PreemptionPolicy = p.PreemptionPolicy
	}
	return cfg
}

// node is an item with its resolved configuration and its place in the tree.
type node struct {
	item      *WorkloadItem
	cfg       *Config
	parent    *node
	children  []*node
	level     int // the root is level 1
	composite bool
}

// treeError reports a malformed tree (a nil item) at the place it was found.
type treeError struct {
	path *field.Path
	msg  string
}

func (e *treeError) Error() string { return fmt.Sprintf("%s: %s", e.path, e.msg) }

// resolveTree resolves every item top-down, so a child can inherit its
// parent's priority fields. Adjust callbacks run once per item per call.
func resolveTree(root *WorkloadItem) (*node, error) {
	if root == nil {
		return nil, &treeError{msg: "the root WorkloadItem is nil"}
	}
	return resolveNode(root, nil)
}

func resolveNode(item *WorkloadItem, parent *node) (*node, error) {
	n := &node{item: item, parent: parent, level: 1, composite: item.isComposite()}
	cfg := &Config{}
	if parent != nil {
		n.level = parent.level + 1
		// The root's priority is authoritative for the whole hierarchy
		// (and Validate insists every template agrees with it), so a child
		// that says nothing inherits rather than falling back to zero.
		cfg.overlay(&Config{
			PriorityClassName: parent.cfg.PriorityClassName,
			Priority:          parent.cfg.Priority,
			PreemptionPolicy:  parent.cfg.PreemptionPolicy,
		})
	}
	cfg.overlay(item.Defaults)
	cfg.overlay(item.inputConfig(n.composite))
	for _, adjust := range item.Adjust {
		if adjust != nil {
			adjust(cfg)
		}
	}
	if cfg.Policy == "" {
		cfg.Policy = BasicPolicy
	}
	n.cfg = cfg

	for i, child := range item.Children {
		if child == nil {
			return nil, &treeError{
				path: item.childrenPath(listPodGroupTemplates).Index(i),
				msg:  fmt.Sprintf("child %d of WorkloadItem %q is nil", i, item.Name),
			}
		}
		c, err := resolveNode(child, n)
		if err != nil {
			return nil, err
		}
		n.children = append(n.children, c)
	}
	return n, nil
}

// walk visits n and its descendants in pre-order.
func (n *node) walk(visit func(*node)) {
	visit(n)
	for _, c := range n.children {
		c.walk(visit)
	}
}

// Template list names, used as default path elements for child lists.
const (
	listPodGroupTemplates          = "podGroupTemplates"
	listCompositePodGroupTemplates = "compositePodGroupTemplates"
)

func (it *WorkloadItem) namePath() *field.Path {
	if it.NamePath != nil {
		return it.NamePath
	}
	return it.Path.Child("name")
}

func (it *WorkloadItem) childrenPath(list string) *field.Path {
	if it.ChildrenPath != nil {
		return it.ChildrenPath
	}
	return it.Path.Child(list)
}

// locator turns a field's path relative to a block into the path where the
// user wrote it.
type locator struct {
	base      *field.Path
	overrides map[string]*field.Path
}

func locate[T any](b Block[T], fallback *field.Path) locator {
	base := b.Path
	if base == nil {
		base = fallback
	}
	return locator{base: base, overrides: b.FieldPaths}
}

// at resolves the field that rel reaches from a block root. rel is applied
// twice: to nil, giving the relative path that keys FieldPaths, and to the
// block's base, giving the default location.
func (l locator) at(rel func(*field.Path) *field.Path) *field.Path {
	if p, ok := l.overrides[rel(nil).String()]; ok {
		return p
	}
	return rel(l.base)
}

// child is at for a plain chain of field names.
func (l locator) child(name string, more ...string) *field.Path {
	return l.at(func(p *field.Path) *field.Path { return p.Child(name, more...) })
}

// Block locators of an item, for the item's kind.
func (it *WorkloadItem) policyLoc(composite bool) locator {
	if composite {
		return locate(it.Input.CompositeSchedulingPolicy, it.Path.Child("schedulingPolicy"))
	}
	return locate(it.Input.SchedulingPolicy, it.Path.Child("schedulingPolicy"))
}

func (it *WorkloadItem) constraintsLoc(composite bool) locator {
	if composite {
		return locate(it.Input.CompositeSchedulingConstraints, it.Path.Child("schedulingConstraints"))
	}
	return locate(it.Input.SchedulingConstraints, it.Path.Child("schedulingConstraints"))
}

func (it *WorkloadItem) disruptionLoc(composite bool) locator {
	if composite {
		return locate(it.Input.CompositeDisruptionMode, it.Path.Child("disruptionMode"))
	}
	return locate(it.Input.DisruptionMode, it.Path.Child("disruptionMode"))
}

func (it *WorkloadItem) claimsLoc() locator {
	return locate(it.Input.ResourceClaims, it.Path.Child("resourceClaims"))
}

func (it *WorkloadItem) priorityLoc() locator {
	return locate(it.Input.Priority, it.Path)
}

// minCountField is the JSON name of the gang count for the item's kind.
func minCountField(composite bool) string {
	if composite {
		return "minGroupCount"
	}
	return "minCount"
}
