// Package groupcache feeds the group model (pkg/groups) from the API: the
// informers of pods, PriorityClasses and every dialect's group kinds
// (Fed, Informed), the optional dialects' informers that follow discovery
// (feeds.go), the pods PreEnqueue sees before the informer does
// (EnsurePod), the PriorityClass lister that keeps the globalDefault class
// from events, and the View's place in a scheduling cycle's CycleState
// (ViewFor, ViewIn). The group state itself, its lock and every rule over
// it stay in pkg/groups, which links none of this.
package groupcache
