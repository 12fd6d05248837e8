package gangcore

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/phalanx-sched/phalanx/pkg/groups"
	"github.com/phalanx-sched/phalanx/pkg/placement"
)

// PreFilterInput is what PreFilter decides from one read of a member's
// hierarchy, once its View passed: whether the members agree, whether the
// gang is complete, and whether its minimum could fit the cluster at all.
// The plugin remembers the member and size verdicts per revision and asks
// for each only when its memo does not cover the revision read, so one call
// answers every question PreFilter has of the core.
type PreFilterInput struct {
	// Ref is the member being scheduled; Root, Priority and Policy are its
	// hierarchy's root and effective priority and policy (the View's).
	Ref      *corev1.Pod
	Root     groups.Info
	Priority int32
	Policy   corev1.PreemptionPolicy

	// CheckMembers asks whether Members, the hierarchy's live members,
	// agree with Ref and the root.
	CheckMembers bool
	Members      []*corev1.Pod

	// Quorum is whether the members that exist reach every minimum; Short
	// is the first level short of it.
	Quorum bool
	Short  groups.Shortfall

	// CheckSize asks whether MinCount members, with the requests of the
	// leaf's members, could fit Alloc, the nodes' allocatable.
	CheckSize bool
	MinCount  int
	Requests  []placement.Resources
	Alloc     []placement.Resources
}

// PreFilterVerdict holds PreFilter's answers; an empty field is a pass or
// a question not asked.
type PreFilterVerdict struct {
	Disagreement string
	Waiting      string
	TooLarge     string
}

// PreFilterChecks answers in.
func PreFilterChecks(in PreFilterInput) PreFilterVerdict {
	var out PreFilterVerdict
	if in.CheckMembers {
		out.Disagreement = DisagreementAt(in.Ref, in.Members, in.Root, in.Priority, in.Policy)
	}
	if !in.Quorum {
		out.Waiting = WaitingMessage(in.Short)
	}
	if in.CheckSize {
		out.TooLarge = ExceedsAllocatable(in.MinCount, in.Requests, in.Alloc)
	}
	return out
}
