// Package workloadbuilder turns a controller's scheduling intent into a
// scheduling.phalanx.dev/v1alpha1 Workload and the PodGroup and
// CompositePodGroup objects made from it. It does the defaulting, validation
// and template compilation that every workload controller (Job, JobSet,
// LeaderWorkerSet, ...) would otherwise write for itself, the way upstream's
// k8s.io/component-helpers/scheduling/schedulingv1/workloadbuilder does for
// scheduling.k8s.io.
//
// # Building blocks
//
// A controller embeds the Workload* building blocks in its own API (or fills
// them from annotations): WorkloadPodGroupSchedulingPolicy,
// WorkloadPodGroupSchedulingConstraints, WorkloadPodGroupDisruptionMode,
// WorkloadPodGroupResourceClaim and WorkloadPriority for a group of pods, and
// the WorkloadCompositePodGroup* twins for a group of groups. A gang's count
// is optional in the blocks, because the controller usually knows the right
// default: a Job's parallelism, the number of a JobSet's replicated jobs.
//
// # The item tree
//
// The controller describes its workload as a tree of WorkloadItem. A leaf
// becomes a podGroupTemplate; an item with children becomes a
// compositePodGroupTemplate. The tree is at most four levels deep (three
// composite levels above the leaves) and its template names are unique.
// Each item's configuration is resolved in this order, each step overriding
// only what it sets:
//
//  1. the parent's priority fields (one hierarchy has one priority),
//  2. the controller's Defaults,
//  3. the user's Input blocks,
//  4. the controller's Adjust callbacks.
//
// Every block carries the field path where the user wrote it, and may
// relocate single fields (Block.FieldPaths), so that an error about a
// minCount read from an annotation names that annotation:
//
//	metadata.annotations[scheduling.phalanx.dev/min-count]: Invalid value: 0: must be greater than or equal to 1
//
// # Validation
//
// Builder.Validate has two layers. The structural layer checks the user's
// blocks as written (required fields, ranges, unions, formats, list sizes,
// unique names, depth, one priority per hierarchy) and, given the stored
// configuration in ValidationInput, immutability on update. A controller
// whose API server already validates the embedded blocks turns it off with
// BuildOptions.DisableDeclarativeValidation. The controller-policy layer
// always runs on the resolved configuration: the AllowedPolicies and
// AllowedDisruptionModes allow-lists, the rule that the all disruption mode
// needs a gang, and gang counts the controller failed to default.
//
// # Building
//
// A controller validates, builds and creates:
//
//	b := workloadbuilder.NewBuilder(item, workloadbuilder.BuildOptions{
//		Name: job.Name, Namespace: job.Namespace, Owner: ownerRef,
//		AllowedPolicies:        []workloadbuilder.PolicyKind{workloadbuilder.BasicPolicy, workloadbuilder.GangPolicy},
//		AllowedDisruptionModes: []workloadbuilder.DisruptionModeKind{workloadbuilder.SingleMode, workloadbuilder.AllMode},
//	})
//	if errs := b.Validate(ctx, workloadbuilder.ValidationInput{}); len(errs) > 0 {
//		return errs.ToAggregate()
//	}
//	workload, err := b.BuildWorkload()             // compiled once, then cached
//	podGroup, err := b.NewPodGroup(name, "workers") // or b.Groups() for all of them
//
// Group objects are named <workload>-<template> (GroupName), link to the
// Workload through spec.workloadRef and to their parent through
// spec.parentCompositePodGroupName. A Workload controller that finds a stored
// Workload uses NewBuilderFromExistingWorkload, which neither validates nor
// recompiles it, and calls Groups.
package workloadbuilder
