package controller

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"

	"github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
	"github.com/phalanx-sched/phalanx/pkg/generated/clientset/versioned"
	schedinformers "github.com/phalanx-sched/phalanx/pkg/generated/informers/externalversions/scheduling/v1alpha1"
	listers "github.com/phalanx-sched/phalanx/pkg/generated/listers/scheduling/v1alpha1"
	wb "github.com/phalanx-sched/phalanx/pkg/workloadbuilder"
)

// workloadController creates the group objects of every Workload: one per
// template, named <workload>-<template>, owned by the Workload.
type workloadController struct {
	loop
	client     versioned.Interface
	workloads  listers.WorkloadLister
	podGroups  listers.PodGroupLister
	composites listers.CompositePodGroupLister
	recorder   record.EventRecorder
}

func newWorkloadController(client versioned.Interface, workloads schedinformers.WorkloadInformer,
	podGroups schedinformers.PodGroupInformer, composites schedinformers.CompositePodGroupInformer,
	recorder record.EventRecorder) (*workloadController, error) {
	c := &workloadController{
		client:     client,
		workloads:  workloads.Lister(),
		podGroups:  podGroups.Lister(),
		composites: composites.Lister(),
		recorder:   recorder,
	}
	c.loop = newLoop("workload", c.sync)

	enqueue := func(obj interface{}) {
		if key, err := cache.ObjectToName(obj); err == nil {
			c.queue.Add(key)
		}
	}
	if _, err := workloads.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: enqueue,
		UpdateFunc: func(old, cur interface{}) {
			// Status writes (ours and the Job integration's) do not change
			// what groups should exist.
			if old.(*v1alpha1.Workload).Generation != cur.(*v1alpha1.Workload).Generation {
				enqueue(cur)
			}
		},
	}); err != nil {
		return nil, fmt.Errorf("add Workload handler: %w", err)
	}
	// A deleted group is re-created from the Workload's current template;
	// deleting a group that blocked ours (a name conflict) lets ours in.
	groupDeleted := func(obj interface{}) {
		if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = t.Obj
		}
		if m, err := metaOf(obj); err == nil {
			c.enqueueWorkloadsNaming(m.GetNamespace(), m.GetName())
		}
	}
	for _, inf := range []cache.SharedIndexInformer{podGroups.Informer(), composites.Informer()} {
		if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{DeleteFunc: groupDeleted}); err != nil {
			return nil, fmt.Errorf("add group handler: %w", err)
		}
	}
	return c, nil
}

func metaOf(obj interface{}) (metav1.Object, error) {
	m, ok := obj.(metav1.Object)
	if !ok {
		return nil, fmt.Errorf("%T has no object metadata", obj)
	}
	return m, nil
}

// enqueueWorkloadsNaming enqueues every Workload whose groups could be
// called groupName, i.e. whose name is a prefix of it followed by "-".
func (c *workloadController) enqueueWorkloadsNaming(namespace, groupName string) {
	all, err := c.workloads.Workloads(namespace).List(labels.Everything())
	if err != nil {
		return
	}
	for _, w := range all {
		if strings.HasPrefix(groupName, w.Name+"-") {
			c.enqueue(w.Namespace, w.Name)
		}
	}
}

func (c *workloadController) sync(ctx context.Context, key cache.ObjectName) error {
	w, err := c.workloads.Workloads(key.Namespace).Get(key.Name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if w.DeletionTimestamp != nil {
		// The garbage collector removes the groups with it.
		return nil
	}
	logger := klog.FromContext(ctx).WithValues("workload", klog.KObj(w))

	if errs := validateWorkload(ctx, w); len(errs) > 0 {
		return c.report(ctx, w, metav1.ConditionFalse, v1alpha1.ReasonInvalid,
			fmt.Sprintf("no groups were created because the Workload is invalid: %s", errs.ToAggregate()))
	}
	owner := wb.WorkloadOwnerReference(w)
	b, err := wb.NewBuilderFromExistingWorkload(w, wb.BuildOptions{Owner: &owner})
	if err != nil {
		return err
	}
	pgs, cpgs, err := b.Groups()
	if err != nil {
		// A name the API server would refuse, such as a Workload name so
		// long that <workload>-<template> exceeds 253 characters.
		return c.report(ctx, w, metav1.ConditionFalse, v1alpha1.ReasonInvalid,
			fmt.Sprintf("no groups were created: %v", err))
	}

	// Composites first, parents before children, so no PodGroup ever names
	// a parent that does not exist yet.
	var names, conflicts []string
	for _, g := range cpgs {
		conflict, err := c.ensureComposite(ctx, w, g)
		if err != nil {
			return err
		}
		names, conflicts = appendOutcome(names, conflicts, "CompositePodGroup", g.Name, conflict)
	}
	for _, g := range pgs {
		conflict, err := c.ensurePodGroup(ctx, w, g)
		if err != nil {
			return err
		}
		names, conflicts = appendOutcome(names, conflicts, "PodGroup", g.Name, conflict)
	}
	if len(conflicts) > 0 {
		return c.report(ctx, w, metav1.ConditionFalse, ReasonConflict,
			fmt.Sprintf("%s already exist%s and %s not controlled by this Workload: delete or rename %s, or rename the Workload",
				strings.Join(conflicts, ", "), plural(len(conflicts), "s", ""), plural(len(conflicts), "is", "are"), plural(len(conflicts), "it", "them")))
	}
	logger.V(4).Info("Workload groups exist", "groups", names)
	return c.report(ctx, w, metav1.ConditionTrue, ReasonCreated,
		fmt.Sprintf("%d %s: %s", len(names), plural(len(names), "group exists", "groups exist"), strings.Join(names, ", ")))
}

func appendOutcome(names, conflicts []string, kind, name string, conflict bool) ([]string, []string) {
	if conflict {
		return names, append(conflicts, kind+" "+name)
	}
	return append(names, name), conflicts
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// ensurePodGroup creates g unless it exists. An existing group is never
// rewritten, whatever the template says now; it reports a
// conflict when the existing object is not ours.
func (c *workloadController) ensurePodGroup(ctx context.Context, w *v1alpha1.Workload, g *v1alpha1.PodGroup) (bool, error) {
	existing, err := c.podGroups.PodGroups(g.Namespace).Get(g.Name)
	if err == nil {
		return !metav1.IsControlledBy(existing, w), nil
	}
	if !apierrors.IsNotFound(err) {
		return false, err
	}
	api := c.client.SchedulingV1alpha1().PodGroups(g.Namespace)
	_, err = api.Create(ctx, g, metav1.CreateOptions{FieldManager: v1alpha1.ControllerName})
	if apierrors.IsAlreadyExists(err) {
		// Our cache is behind; judge the object the API server has.
		live, getErr := api.Get(ctx, g.Name, metav1.GetOptions{})
		if getErr != nil {
			return false, getErr
		}
		return !metav1.IsControlledBy(live, w), nil
	}
	if err != nil {
		return false, fmt.Errorf("create PodGroup %s/%s for Workload %s: %w", g.Namespace, g.Name, w.Name, err)
	}
	klog.FromContext(ctx).V(2).Info("Created PodGroup", "podGroup", klog.KObj(g), "workload", klog.KObj(w))
	return false, nil
}

// ensureComposite is ensurePodGroup for a CompositePodGroup.
func (c *workloadController) ensureComposite(ctx context.Context, w *v1alpha1.Workload, g *v1alpha1.CompositePodGroup) (bool, error) {
	existing, err := c.composites.CompositePodGroups(g.Namespace).Get(g.Name)
	if err == nil {
		return !metav1.IsControlledBy(existing, w), nil
	}
	if !apierrors.IsNotFound(err) {
		return false, err
	}
	api := c.client.SchedulingV1alpha1().CompositePodGroups(g.Namespace)
	_, err = api.Create(ctx, g, metav1.CreateOptions{FieldManager: v1alpha1.ControllerName})
	if apierrors.IsAlreadyExists(err) {
		live, getErr := api.Get(ctx, g.Name, metav1.GetOptions{})
		if getErr != nil {
			return false, getErr
		}
		return !metav1.IsControlledBy(live, w), nil
	}
	if err != nil {
		return false, fmt.Errorf("create CompositePodGroup %s/%s for Workload %s: %w", g.Namespace, g.Name, w.Name, err)
	}
	klog.FromContext(ctx).V(2).Info("Created CompositePodGroup", "compositePodGroup", klog.KObj(g), "workload", klog.KObj(w))
	return false, nil
}

// report writes the GroupsCreated condition and, when it changed, an Event
// on the Workload, so a problem is announced once rather than per resync.
func (c *workloadController) report(ctx context.Context, w *v1alpha1.Workload, status metav1.ConditionStatus, reason, msg string) error {
	changed, err := setWorkloadCondition(ctx, c.client, w, metav1.Condition{
		Type: ConditionGroupsCreated, Status: status, Reason: reason, Message: msg,
	})
	if err != nil {
		return fmt.Errorf("set %s condition on Workload %s/%s: %w", ConditionGroupsCreated, w.Namespace, w.Name, err)
	}
	if !changed {
		return nil
	}
	if status == metav1.ConditionTrue {
		c.recorder.Event(w, corev1.EventTypeNormal, "GroupsCreated", msg)
	} else {
		c.recorder.Event(w, corev1.EventTypeWarning, reason, msg)
	}
	return nil
}
