package controller

import (
	"context"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
	wb "github.com/phalanx-sched/phalanx/pkg/workloadbuilder"
)

// workloadOptions is the Workload controller's allow-list: a hand-written
// Workload may use every option the API has.
var workloadOptions = wb.BuildOptions{
	AllowedPolicies:        []wb.PolicyKind{wb.BasicPolicy, wb.GangPolicy},
	AllowedDisruptionModes: []wb.DisruptionModeKind{wb.SingleMode, wb.AllMode},
}

// validateWorkload runs workloadbuilder's structural and policy layers over
// a stored Workload. The API server has checked the schema already, but not
// the rules that span the tree: template names unique across levels (they
// name objects in one namespace), one priority per hierarchy, the all
// disruption mode only with a gang. Errors name the Workload's own fields,
// such as spec.compositePodGroupTemplates[0].podGroupTemplates[1].name.
//
// The builder compiles one root at a time, so each top-level template is
// validated as its own tree and names are then compared across trees.
func validateWorkload(ctx context.Context, w *v1alpha1.Workload) field.ErrorList {
	spec := field.NewPath("spec")
	var roots []*wb.WorkloadItem
	for i := range w.Spec.PodGroupTemplates {
		roots = append(roots, leafItem(&w.Spec.PodGroupTemplates[i], spec.Child("podGroupTemplates").Index(i)))
	}
	for i := range w.Spec.CompositePodGroupTemplates {
		l1 := &w.Spec.CompositePodGroupTemplates[i]
		path := spec.Child("compositePodGroupTemplates").Index(i)
		var children []*wb.WorkloadItem
		for j := range l1.CompositePodGroupTemplates {
			l2 := &l1.CompositePodGroupTemplates[j]
			l2Path := path.Child("compositePodGroupTemplates").Index(j)
			var grandchildren []*wb.WorkloadItem
			for k := range l2.CompositePodGroupTemplates {
				l3 := &l2.CompositePodGroupTemplates[k]
				grandchildren = append(grandchildren, compositeItem(&l3.CompositePodGroupTemplateFields, l2Path.Child("compositePodGroupTemplates").Index(k), nil))
			}
			children = append(children, compositeItem(&l2.CompositePodGroupTemplateFields, l2Path, grandchildren))
		}
		roots = append(roots, compositeItem(&l1.CompositePodGroupTemplateFields, path, children))
	}

	var errs field.ErrorList
	for _, root := range roots {
		errs = append(errs, wb.NewBuilder(root, workloadOptions).Validate(ctx, wb.ValidationInput{})...)
	}
	return append(errs, duplicatesAcrossRoots(roots)...)
}

// duplicatesAcrossRoots reports a template name that an earlier top-level
// tree already used. Duplicates inside one tree are the builder's to report.
func duplicatesAcrossRoots(roots []*wb.WorkloadItem) field.ErrorList {
	var errs field.ErrorList
	seen := map[string]bool{}
	for _, root := range roots {
		mine := map[string]bool{}
		walkItems(root, func(it *wb.WorkloadItem) {
			if seen[it.Name] && !mine[it.Name] {
				errs = append(errs, field.Duplicate(it.Path.Child("name"), it.Name))
			}
			mine[it.Name] = true
		})
		for name := range mine {
			seen[name] = true
		}
	}
	return errs
}

func walkItems(it *wb.WorkloadItem, visit func(*wb.WorkloadItem)) {
	visit(it)
	for _, c := range it.Children {
		walkItems(c, visit)
	}
}

// leafItem turns a podGroupTemplate back into the building blocks it was
// made of, each at its place in the Workload.
func leafItem(t *v1alpha1.PodGroupTemplate, path *field.Path) *wb.WorkloadItem {
	policy := &wb.WorkloadPodGroupSchedulingPolicy{}
	if t.SchedulingPolicy.Basic != nil {
		policy.Basic = &wb.WorkloadPodGroupBasicSchedulingPolicy{}
	}
	if g := t.SchedulingPolicy.Gang; g != nil {
		n := g.MinCount
		policy.Gang = &wb.WorkloadPodGroupGangSchedulingPolicy{MinCount: &n}
	}
	in := wb.Input{SchedulingPolicy: wb.At(path.Child("schedulingPolicy"), policy)}
	if c := t.SchedulingConstraints; c != nil {
		in.SchedulingConstraints = wb.At(path.Child("schedulingConstraints"),
			&wb.WorkloadPodGroupSchedulingConstraints{Topology: c.Topology})
	}
	if d := t.DisruptionMode; d != nil {
		mode := &wb.WorkloadPodGroupDisruptionMode{}
		if d.Single != nil {
			mode.Single = &wb.WorkloadPodGroupSingleDisruptionMode{}
		}
		if d.All != nil {
			mode.All = &wb.WorkloadPodGroupAllDisruptionMode{}
		}
		in.DisruptionMode = wb.At(path.Child("disruptionMode"), mode)
	}
	if len(t.ResourceClaims) > 0 {
		claims := make([]wb.WorkloadPodGroupResourceClaim, 0, len(t.ResourceClaims))
		for _, c := range t.ResourceClaims {
			claims = append(claims, wb.WorkloadPodGroupResourceClaim{
				Name:                      c.Name,
				ResourceClaimName:         c.ResourceClaimName,
				ResourceClaimTemplateName: c.ResourceClaimTemplateName,
			})
		}
		in.ResourceClaims = wb.At(path.Child("resourceClaims"), claims)
	}
	in.Priority = priorityBlock(path, t.PriorityClassName, t.Priority, t.PreemptionPolicy)
	return &wb.WorkloadItem{Name: t.Name, Path: path, Input: in}
}

// compositeItem is leafItem for a compositePodGroupTemplate at any level;
// composites are the children that follow its podGroupTemplates.
func compositeItem(f *v1alpha1.CompositePodGroupTemplateFields, path *field.Path, composites []*wb.WorkloadItem) *wb.WorkloadItem {
	policy := &wb.WorkloadCompositePodGroupSchedulingPolicy{}
	if f.SchedulingPolicy.Basic != nil {
		policy.Basic = &wb.WorkloadCompositePodGroupBasicSchedulingPolicy{}
	}
	if g := f.SchedulingPolicy.Gang; g != nil {
		n := g.MinGroupCount
		policy.Gang = &wb.WorkloadCompositePodGroupGangSchedulingPolicy{MinGroupCount: &n}
	}
	in := wb.Input{CompositeSchedulingPolicy: wb.At(path.Child("schedulingPolicy"), policy)}
	if c := f.SchedulingConstraints; c != nil {
		in.CompositeSchedulingConstraints = wb.At(path.Child("schedulingConstraints"),
			&wb.WorkloadCompositePodGroupSchedulingConstraints{Topology: c.Topology})
	}
	if d := f.DisruptionMode; d != nil {
		mode := &wb.WorkloadCompositePodGroupDisruptionMode{}
		if d.Single != nil {
			mode.Single = &wb.WorkloadCompositePodGroupSingleDisruptionMode{}
		}
		if d.All != nil {
			mode.All = &wb.WorkloadCompositePodGroupAllDisruptionMode{}
		}
		in.CompositeDisruptionMode = wb.At(path.Child("disruptionMode"), mode)
	}
	in.Priority = priorityBlock(path, f.PriorityClassName, f.Priority, f.PreemptionPolicy)

	item := &wb.WorkloadItem{Name: f.Name, Path: path, Input: in}
	for i := range f.PodGroupTemplates {
		item.Children = append(item.Children, leafItem(&f.PodGroupTemplates[i], path.Child("podGroupTemplates").Index(i)))
	}
	item.Children = append(item.Children, composites...)
	return item
}

// priorityBlock is set only when the template says something, so that a
// silent child inherits its parent's priority as the builder intends.
func priorityBlock(path *field.Path, className string, priority *int32, preemption *v1alpha1.PreemptionPolicy) wb.Block[*wb.WorkloadPriority] {
	if className == "" && priority == nil && preemption == nil {
		return wb.Block[*wb.WorkloadPriority]{}
	}
	return wb.At(path, &wb.WorkloadPriority{PriorityClassName: className, Priority: priority, PreemptionPolicy: preemption})
}
