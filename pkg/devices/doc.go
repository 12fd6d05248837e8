// Package devices counts DRA devices for group plans.
//
// A gang whose members allocate GPUs through ResourceClaims must be planned
// with the devices in mind: the planner counts cpu and memory per node, and
// without devices it puts several members on a node that has one GPU left,
// the DynamicResources Filter refuses all but one, and the gang retries as
// a unit. This package gives the planner two numbers, both computed with
// upstream's own code (k8s.io/dynamic-resource-allocation: the CEL
// evaluation of device class selectors and the structured allocator),
// never with a copy of its rules:
//
//   - Room: per node and device class, the node-local devices that match the
//     class, and how many of them are allocated. The planner counts them
//     like any resource (placement.DeviceResource), so devices show up in
//     shortfalls ("short 2 devices of class gpu.example.com"), are freed by
//     preemption victims, and are shared by every shape of a plan.
//   - Fits: for members whose claims ask more than "N devices of a class"
//     (request selectors, constraints such as matchAttribute, prioritized
//     lists, admin access, capacity, partitionable or tainted devices), how
//     many of them a node holds, found by allocating their claims on the
//     node one after another, exactly as the members' DynamicResources
//     Filter and Reserve will when they are scheduled in turn.
//
// Answers are kept per node and keyed by what they read (the node's slices
// and the devices allocated there), so a plan recomputes only the nodes
// whose devices changed.
package devices
