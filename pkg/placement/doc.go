// Package placement decides where the pending pods of a group tree go: a
// PodGroup, or a CompositePodGroup hierarchy of them, against plain node
// structs built from the scheduler snapshot. It imports no framework and no
// client, so it can be fuzzed, benchmarked at 7,500 nodes and reasoned
// about on its own. PlanGroup is the entry point.
//
// # Algorithm
//
// Pods of a group that share requests, tolerations, node selector and
// required affinity form a Shape. For every distinct shape the static checks
// (cordon, NoSchedule/NoExecute taints, selector, affinity) run once per
// node. From then on, how many pods of a shape a node holds is arithmetic
// on two residuals, the free amount of every requested resource and the free
// pod slots. Every placement updates the residuals and appends to an undo
// log, so capacity that one group of the plan takes is never offered to
// another, and a failed trial rolls back exactly.
//
// The tree is planned top-down in two phases.
//
//  1. Quorum. A group chooses its domain inside its parent's domain. The
//     candidates are the values of its topology key among the parent's
//     nodes, or the parent's nodes as a whole when it is unconstrained. If
//     members are already bound, the domain of their nodes is the only
//     candidate (pinning); disagreeing bound pods are settled by majority.
//     Every candidate gets an estimate from per-shape capacity sums: how many
//     pending pods of the subtree it holds at most, and how much room would
//     remain. A relaxation drops candidates that cannot work, and the rest
//     are sorted by the domain policy. The group then tries them in order:
//     a leaf places the pods its gang still needs, MinCount minus the bound
//     members (nothing for a basic leaf); a composite runs the quorum of
//     each child inside the candidate. A leaf keeps the first candidate that
//     works. A composite keeps the first where every child is satisfied,
//     or else the one where most are, if that reaches MinGroupCount (always,
//     for a basic composite). Children that fail inside a kept domain leave
//     their pods unplaced and are reported in Plan.Unsatisfied.
//  2. Surplus. Each satisfied leaf then places its remaining pending pods
//     in its domain while they fit. Doing this after every quorum means one
//     gang's extra pods never cost a sibling its quorum.
//
// Siblings are ordered so the greedy does well: the largest quorum first
// when a composite needs all of its children, the smallest first when it
// needs only some (that satisfies the most). Within a leaf, the shape under
// the most pressure in the domain goes first: the highest ratio of its
// pending pods to the pods of it the domain holds, so a job's GPU workers
// are placed before a driver that fits anywhere; ties go to the larger
// shape, then to the one fewer nodes admit. Within a shape, nodes are filled
// best-fit: the node with room for the fewest pods of the shape first, ties
// by name, so that large holes stay open.
//
// # Exactness
//
// For a homogeneous leaf, one shape, per-node counts are independent and
// additive, so a domain's capacity sum is exact and the plan is feasible
// exactly when some placement exists. The same holds for a composite whose
// children share one shape and are unconstrained inside its domain. With
// several shapes, or with several constrained children competing for the
// same sub-domains, the problem is bin packing; the greedy above is then a
// heuristic that may miss a placement, but it never overcommits a node and
// never breaks a topology constraint.
//
// # Cost
//
// Reading the input costs O(nodes × (resources + topology keys)) map
// lookups, and sorting the nodes by name O(nodes log nodes) string
// comparisons; at 7,500 nodes this is most of a plan's cost. Static checks
// cost O(nodes × shapes) once per plan. At each level of the
// tree the candidate domains of a group partition its parent's domain, so
// estimating them costs one capacity count per node per shape of the
// subtree, and trying them all costs at most as much again. Placing k pods
// of a shape on a domain of n nodes costs O(n + k log n) with a heap. A plan
// is therefore O(depth × nodes × shapes + pods × log nodes); the tree is
// at most four levels deep. Nothing runs per pod per node.
//
// # Preferred levels
//
// A leaf may also name preferred levels below its topology key, narrowest
// first (rack, then block). It then goes into one domain of the first
// level when one holds its quorum, else into the fewest domains of a level
// that one domain of the next level holds, climbing no higher than its
// topology key; Plan.Choices says where and why. preferred.go has the
// details; they cost one capacity count per node per shape, as above.
//
// # Rank order
//
// Pods of a leaf may carry ranks, their places in an all-reduce ring.
// Placement decides how many pods of a shape each node takes, as above;
// then the ranked pods of the shape take those nodes in rank order,
// sorted depth-first by their domains (Options.RankLevels and the tree's
// keys, nested by how many domains they span) and by name, unranked pods
// after them. Each domain then holds one run of consecutive ranks: the
// fewest ring boundary crossings, at every level at once, that the chosen
// nodes allow. A pod's Prefer node, where its rank ran before, is filled
// first and kept for it. rank.go has the details.
//
// # Domain policy
//
// Options.DomainPolicy orders the feasible candidates. BestFit, the
// default, prefers the domain that holds the most pending pods (up to all
// of them), then the one leaving the least room, counted in pods of the
// group's shapes, then the smallest label value: small gangs fill the
// tightest rack that fits them and leave empty racks for large ones.
// WorstFit leaves the most room instead, which spreads groups. FirstFit
// takes the feasible domain with the smallest value.
package placement
