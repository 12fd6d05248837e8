package workloadbuilder

import (
	"fmt"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
)

// GroupName is the name of the group object made from a template:
// <workload>-<template>. Parent links use it too, so it is the one place that
// decides how the controller's objects find each other.
func GroupName(workloadName, templateName string) string {
	return workloadName + "-" + templateName
}

// templateEntry is one template of a Workload, whichever list and level it
// sits in.
type templateEntry struct {
	leaf      *v1alpha1.PodGroupTemplate
	composite *v1alpha1.CompositePodGroupTemplateFields
	// parent is the name of the enclosing composite template, "" at the top.
	parent string
}

// templateIndex finds templates by name and remembers their order (parents
// before children), which is the order in which groups can be created.
type templateIndex struct {
	byName map[string]templateEntry
	order  []string
}

// indexTemplates flattens the unrolled template levels. Names are unique
// across a valid Workload; should a stored one repeat a name anyway, the
// first occurrence wins, as NewBuilderFromExistingWorkload promises not to
// second-guess the API server.
func indexTemplates(w *v1alpha1.Workload) *templateIndex {
	idx := &templateIndex{byName: map[string]templateEntry{}}
	add := func(name string, e templateEntry) {
		if _, dup := idx.byName[name]; dup {
			return
		}
		idx.byName[name] = e
		idx.order = append(idx.order, name)
	}
	addFields := func(f *v1alpha1.CompositePodGroupTemplateFields, parent string) {
		add(f.Name, templateEntry{composite: f, parent: parent})
		for i := range f.PodGroupTemplates {
			add(f.PodGroupTemplates[i].Name, templateEntry{leaf: &f.PodGroupTemplates[i], parent: f.Name})
		}
	}

	for i := range w.Spec.PodGroupTemplates {
		add(w.Spec.PodGroupTemplates[i].Name, templateEntry{leaf: &w.Spec.PodGroupTemplates[i]})
	}
	for i := range w.Spec.CompositePodGroupTemplates {
		l1 := &w.Spec.CompositePodGroupTemplates[i]
		addFields(&l1.CompositePodGroupTemplateFields, "")
		for j := range l1.CompositePodGroupTemplates {
			l2 := &l1.CompositePodGroupTemplates[j]
			addFields(&l2.CompositePodGroupTemplateFields, l1.Name)
			for k := range l2.CompositePodGroupTemplates {
				l3 := &l2.CompositePodGroupTemplates[k]
				addFields(&l3.CompositePodGroupTemplateFields, l2.Name)
			}
		}
	}
	return idx
}

// names lists the templates for error messages, sorted for stable output.
func (idx *templateIndex) names() string {
	names := slices.Clone(idx.order)
	slices.Sort(names)
	return strings.Join(names, ", ")
}

// index returns the workload and its template index, compiling on first use.
func (b *Builder) index() (*v1alpha1.Workload, *templateIndex, error) {
	w, err := b.BuildWorkload()
	if err != nil {
		return nil, nil, err
	}
	if b.templates == nil {
		b.templates = indexTemplates(w)
	}
	return w, b.templates, nil
}

// lookup finds a template, and fails with the names that do exist.
func (b *Builder) lookup(templateName string) (*v1alpha1.Workload, templateEntry, error) {
	w, idx, err := b.index()
	if err != nil {
		return nil, templateEntry{}, err
	}
	e, ok := idx.byName[templateName]
	if !ok {
		return nil, templateEntry{}, fmt.Errorf("workload %q has no template %q; its templates are: %s", w.Name, templateName, idx.names())
	}
	return w, e, nil
}

// NewPodGroup makes a PodGroup called name from the podGroupTemplate
// templateName, compiling the Workload first if need be. It copies the
// template's policy, constraints, resource claims, disruption mode,
// priority fields and minimum runtime, and links the group to the Workload
// (spec.workloadRef) and to its parent composite group
// <workload>-<parent template>.
func (b *Builder) NewPodGroup(name, templateName string) (*v1alpha1.PodGroup, error) {
	w, e, err := b.lookup(templateName)
	if err != nil {
		return nil, err
	}
	if e.leaf == nil {
		return nil, fmt.Errorf("template %q of workload %q is a compositePodGroupTemplate: use NewCompositePodGroup", templateName, w.Name)
	}
	meta, parent, err := b.groupMeta(w, name, e.parent)
	if err != nil {
		return nil, err
	}
	t := e.leaf.DeepCopy()
	return &v1alpha1.PodGroup{
		ObjectMeta: meta,
		Spec: v1alpha1.PodGroupSpec{
			ParentCompositePodGroupName: parent,
			WorkloadRef:                 &v1alpha1.WorkloadReference{WorkloadName: w.Name, TemplateName: t.Name},
			SchedulingPolicy:            t.SchedulingPolicy,
			SchedulingConstraints:       t.SchedulingConstraints,
			ResourceClaims:              t.ResourceClaims,
			DisruptionMode:              t.DisruptionMode,
			PriorityClassName:           t.PriorityClassName,
			Priority:                    t.Priority,
			PreemptionPolicy:            t.PreemptionPolicy,
			MinRuntimeSeconds:           t.MinRuntimeSeconds,
		},
	}, nil
}

// NewCompositePodGroup is NewPodGroup for a compositePodGroupTemplate. The
// child groups are separate objects that name this one as their parent.
func (b *Builder) NewCompositePodGroup(name, templateName string) (*v1alpha1.CompositePodGroup, error) {
	w, e, err := b.lookup(templateName)
	if err != nil {
		return nil, err
	}
	if e.composite == nil {
		return nil, fmt.Errorf("template %q of workload %q is a podGroupTemplate: use NewPodGroup", templateName, w.Name)
	}
	meta, parent, err := b.groupMeta(w, name, e.parent)
	if err != nil {
		return nil, err
	}
	// Copy only the composite's own fields: its child templates become
	// objects of their own.
	t := e.composite.DeepCopy()
	return &v1alpha1.CompositePodGroup{
		ObjectMeta: meta,
		Spec: v1alpha1.CompositePodGroupSpec{
			ParentCompositePodGroupName: parent,
			WorkloadRef:                 &v1alpha1.WorkloadReference{WorkloadName: w.Name, TemplateName: t.Name},
			SchedulingPolicy:            t.SchedulingPolicy,
			SchedulingConstraints:       t.SchedulingConstraints,
			DisruptionMode:              t.DisruptionMode,
			PriorityClassName:           t.PriorityClassName,
			Priority:                    t.Priority,
			PreemptionPolicy:            t.PreemptionPolicy,
		},
	}, nil
}

// Groups makes every group of the Workload, named <workload>-<template>, as
// the Workload controller creates them. Each list is ordered parents before
// children, so creating the composite groups first and then the PodGroups
// never leaves a dangling parent link.
func (b *Builder) Groups() ([]*v1alpha1.PodGroup, []*v1alpha1.CompositePodGroup, error) {
	w, idx, err := b.index()
	if err != nil {
		return nil, nil, err
	}
	if w.Name == "" {
		return nil, nil, fmt.Errorf("workload has no name, so its groups (named <workload>-<template>) cannot be named; set BuildOptions.Name")
	}
	var pgs []*v1alpha1.PodGroup
	var cpgs []*v1alpha1.CompositePodGroup
	for _, name := range idx.order {
		if idx.byName[name].leaf != nil {
			pg, err := b.NewPodGroup(GroupName(w.Name, name), name)
			if err != nil {
				return nil, nil, err
			}
			pgs = append(pgs, pg)
			continue
		}
		cpg, err := b.NewCompositePodGroup(GroupName(w.Name, name), name)
		if err != nil {
			return nil, nil, err
		}
		cpgs = append(cpgs, cpg)
	}
	return pgs, cpgs, nil
}

// groupMeta builds a group's metadata and parent link, and checks that both
// names are valid object names: a long workload name plus a template name
// can exceed what the API server accepts, and failing here names the cause.
func (b *Builder) groupMeta(w *v1alpha1.Workload, name, parentTemplate string) (metav1.ObjectMeta, *string, error) {
	if msgs := validation.IsDNS1123Subdomain(name); len(msgs) > 0 {
		return metav1.ObjectMeta{}, nil, fmt.Errorf("group name %q: %s", name, strings.Join(msgs, "; "))
	}
	var parent *string
	if parentTemplate != "" {
		p := GroupName(w.Name, parentTemplate)
		if msgs := validation.IsDNS1123Subdomain(p); len(msgs) > 0 {
			return metav1.ObjectMeta{}, nil, fmt.Errorf("parent group name %q: %s", p, strings.Join(msgs, "; "))
		}
		parent = &p
	}
	meta := metav1.ObjectMeta{Name: name, Namespace: w.Namespace}
	if b.opts.Owner != nil {
		meta.OwnerReferences = []metav1.OwnerReference{*b.opts.Owner.DeepCopy()}
	}
	return meta, parent, nil
}
