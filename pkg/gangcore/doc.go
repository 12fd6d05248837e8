// Package gangcore holds the gang rules, framework-free: whether a member
// reserved in Permit lets its gang through, waits, or fails the attempt
// (Permit, from one PermitFacts snapshot of the group cache and the
// waiting members the framework holds); when a gang's Permit round
// expires (Round); which attempts are open and how each ended, for the
// metrics (Attempts), and which attempt's first failure already released
// the waiting members (Releases); whether the members of a hierarchy
// agree on priority, preemption policy and scheduler (Disagreement,
// Mismatch); and whether a gang can fit the cluster's allocatable at all
// (ExceedsAllocatable).
//
// It imports no scheduling framework, lister of the scheduler or plugin:
// the PhalanxGang plugin (pkg/plugins/gang) builds the inputs from the
// framework's calls and acts on the answers (allows or rejects waiting
// pods, writes conditions and events), and the diagnostics
// (pkg/inspect) ask the same functions about groups the scheduler has
// not seen, so an answer there is the one the plugin would give.
package gangcore
