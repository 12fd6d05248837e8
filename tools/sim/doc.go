// Package sim runs scenarios against a sandbox cluster and reports what the
// scheduler did.
//
// A scenario is data (YAML): a cluster shape, PriorityClasses, optionally
// the scheduler's reservation settings, and a list of steps. Each step does
// one thing (create objects, add or delete nodes, delete objects, start a
// background stream of pods with runtimes, or wait for pods to be bound,
// done or to stay pending), then the
// engine takes a snapshot of the scenario's namespace (per group: pods bound,
// pending and evicted, and the topology domains they use; per node: whose
// pods run there) and checks the step's expectations against it.
//
// Results render as terminal tables (Run streams them while it runs) and as a
// self-contained HTML page with an SVG picture of the cluster per step
// (WriteReport).
//
// The package drives a cluster through its clients only, so it does not link
// the API server: callers start a sandbox (tools/sandbox) and pass its clients
// in a Cluster.
package sim
