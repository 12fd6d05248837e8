// Package controller holds the Phalanx controllers: the API writers of the
// Kueue-like split. They decide nothing about placement; they turn what
// users and workload controllers declare into group objects and keep those
// objects' bookkeeping current, from shared informers and client-go
// workqueues. Controllers bundles them; cmd/phalanx-controller runs it under
// leader election and tools/sandbox runs it in-process.
//
// # Workload controller
//
// For every Workload it creates one group object per template, named
// <workload>-<template> (workloadbuilder.NewBuilderFromExistingWorkload and
// Groups): a CompositePodGroup per compositePodGroupTemplate, a PodGroup per
// podGroupTemplate. Each copies its template's policy, constraints,
// disruption mode and priority fields, links to its parent through
// spec.parentCompositePodGroupName and to the Workload through
// spec.workloadRef, and carries a controller ownerReference to the Workload
// with blockOwnerDeletion, so the garbage collector deletes the groups with
// the Workload. Composites are created before PodGroups, parents before
// children.
//
// Before creating anything the Workload is validated with workloadbuilder
// (structural and controller-policy layers, every option allowed), which
// catches what the CRD schema cannot: names repeated across levels, two
// priorities in one hierarchy, the all disruption mode on a basic group.
// The outcome is the Workload's GroupsCreated condition: True with the group
// names, or False with reason Invalid and the field paths, or reason
// Conflict when a group of that name exists and is not ours. An Event on
// the Workload repeats it whenever the condition changes.
//
// Existing groups are never rewritten: a template change affects
// only groups created afterwards (a deleted group is re-created from the
// current template). In particular a change of a leaf template's minCount
// is not propagated to an existing PodGroup by this controller; whoever
// changes it updates the PodGroup too, as the Job integration does.
//
// # Job integration
//
// A batch/v1 Job opts in with the annotation scheduling.phalanx.dev/gang:
// "true". Optional annotations: scheduling.phalanx.dev/min-count (a positive
// integer; default min(parallelism, completions), parallelism defaulting to
// 1) and scheduling.phalanx.dev/topology-key (a node label key). For such a
// Job the controller builds, with workloadbuilder, a Workload named after
// the Job, owned and controlled by it (spec.controllerRef too), with one
// gang podGroupTemplate named "workers"; the Workload controller then
// creates the PodGroup <job>-workers. Priority class and preemption policy
// come from the pod template, because the scheduler requires a group and
// its pods to agree. Invalid settings are reported with the field path of
// the annotation, e.g.
//
//	metadata.annotations[scheduling.phalanx.dev/min-count]: Invalid value: "four": must be a positive integer, such as "4"
//
// as a Warning Event on the Job and, once the Job has a Workload, as its
// JobConfigValid condition (False, reason Invalid); the existing PodGroup
// then keeps its settings. A Workload that cannot be built is not created.
// While no min-count annotation is set the gang size follows the Job: when
// parallelism changes, the controller updates the Workload's template and
// patches the PodGroup's minCount, the one mutable field of its spec. A
// change that a group cannot take (the topology key) is reported, not
// applied.
//
// # Attaching a Job's pods without a webhook
//
// A pod joins a gang through the label scheduling.phalanx.dev/pod-group. A
// Job's pod template cannot be changed after the Job starts (only while it
// is suspended and has never run), and without a mutating webhook nothing
// can label a pod at creation. A pod the scheduler sees before it is
// labelled is scheduled alone, which breaks the gang. So the controller
// labels the pods, and a scheduling gate closes the window:
//
//   - A gang Job lists the gate scheduling.phalanx.dev/gang in
//     spec.template.spec.schedulingGates. Its pods are created gated; the
//     scheduler ignores them.
//   - Once the Job's PodGroup exists (and belongs to the Job, through its
//     Workload), the controller patches each pod once: it adds the label and
//     removes the gate in the same strategic merge patch. Pod labels and
//     removing a gate are both allowed pod updates. The scheduler first sees
//     the pod already in its group, and the gang plugin's quorum check
//     (PreEnqueue) holds it until minCount members exist.
//   - If the settings are invalid, or the Workload name is taken, pods stay
//     gated and the Job's Events say why; a broken gang is never scheduled
//     as plain pods.
//   - A controller that knows the name can instead put the label
//     scheduling.phalanx.dev/pod-group: <job>-workers (JobPodGroupName) in
//     the template itself: there is no race and no gate is needed; the
//     controller only checks the value. A Job with neither gets its pods
//     labelled as they appear, with a GangNotGated Warning, since a pod may
//     be scheduled alone before that.
//
// The alternative of creating gang Jobs suspended and labelling the
// template before resuming them was rejected: it needs every user to create
// the Job suspended, and a Job created running could not be fixed at all.
//
// # PodGroup status
//
// The status controller keeps each PodGroup's status.members (pods that
// exist, are not terminating and have not finished), status.scheduled
// (those with a node) and status.running (those in phase Running), counted
// from the pods attached by the scheduling.phalanx.dev/pod-group label.
// Pod events within StatusDelay of each other become one write per group.
//
// # scheduler-plugins' PodGroup status
//
// While the API server serves scheduler-plugins' scheduling.x-k8s.io
// PodGroup CRD (asked through discovery at start and every 30 s), a fourth
// controller keeps their status as scheduler-plugins' own PodGroup
// controller (v0.34.7) does: phase (Pending, Scheduling, Running, Finished,
// Failed), running, succeeded, failed and occupiedBy, counted from the pods
// of the PodGroup's namespace labelled scheduling.x-k8s.io/pod-group, plus
// scheduleStartTime when the group first enters Scheduling (XPodGroupStatus
// states the rules). Where the CRD is not served it does nothing.
//
// # ProvisioningRequests for whole gangs
//
// With Options.Provisioning, a fifth controller asks a cluster autoscaler
// for the nodes of a gang that does not fit (provisioning.go; the rules are
// in pkg/provisioning). A PodGroup annotated
// scheduling.phalanx.dev/provisioning: atomic (or made for a Workload or
// gang Job so annotated; the nearest annotation wins), whose members all
// name one
// of the configured scheduler names, gets one ProvisioningRequest of the
// autoscaler's atomic class once the scheduler has kept it Schedulable=False
// with reason Unschedulable for a while, below its minimum, with no member
// nominated by a preemption: PodTemplates per member shape first, then the
// request, all owned by the group. Its pending members are annotated as
// the request's consumers, and the group's CapacityRequested condition
// follows the autoscaler's answer; a failed or lapsed request is replaced
// by the next attempt after a backoff.
//
// # Who writes what
//
//	object             field                               writer
//	Workload           spec                                user or the Job integration
//	Workload           status.conditions[GroupsCreated]    Workload controller
//	Workload           status.conditions[JobConfigValid]   Job integration
//	PodGroup           spec (at creation)                  Workload controller
//	PodGroup           spec.schedulingPolicy.gang.minCount Job integration (for Job gangs)
//	PodGroup           status.members/scheduled/running    status controller (merge patch)
//	PodGroup           status.conditions                   scheduler, but CapacityRequested: provisioning controller
//	CompositePodGroup  spec (at creation)                  Workload controller
//	CompositePodGroup  status.conditions                   scheduler only
//	Pod                pod-group label, gang gate removal  Job integration
//	Pod                consume-provisioning-request and
//	                   provisioning-class-name annotations  provisioning controller
//	ProvisioningRequest, PodTemplate (made for a gang)      provisioning controller
//	PodGroup.scheduling.x-k8s.io  status                   x-k8s status controller (merge patch)
//
// Writers of one status share it without stepping on each other: the
// counters go in a merge patch that names only them, and Workload
// conditions are set one type at a time on a fresh copy, retrying
// conflicts. Of PodGroup conditions the controllers write only
// CapacityRequested, the same way, keeping the scheduler's.
package controller
