package placement

import (
	"fmt"
	"math"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
)

// shapeInfo is a shape with its per-node static verdict. Static checks
// (unschedulable, taints, selector, affinity) run once per shape per node;
// what remains per placement is arithmetic on the residuals.
type shapeInfo struct {
	spec          *Shape
	reqs          []resAmount // positive requests only
	eligible      []bool      // per node
	eligibleCount int
	// share is the largest fraction of the biggest node's allocatable one pod
	// asks for, a cluster-wide measure of how large the shape is.
	share float64

	// Member-to-member constraints (constraints.go).
	members []int       // counters a placed pod of the shape adds to
	limits  []limitInfo // counters that bound where the shape may go
	nodeCap []int32     // per node, pods the plan may still put there; nil: no caps
	// clearable are the BlockedBy nodes the static checks admit.
	clearable map[int32]bool
	// shared: a placement changes the counts of other nodes of a domain,
	// so a count taken earlier in the same placement may be stale.
	shared bool
}

// tolerable says whether node n, blocked by running pods, admits the shape
// once they are gone.
func (s *shapeInfo) tolerable(n int32) bool { return s.clearable[n] }

// maxCount bounds per-node counts so that a count fits in 32 bits and sums
// over any realistic number of nodes fit in an int64.
const maxCount = math.MaxInt32

// initResidual reads, per node, only the resources some shape requests:
// the others cannot affect a plan, so they are neither copied nor validated.
func (p *planner) initResidual() error {
	t := p.table
	p.nres = len(p.resNames)
	// Rows of unusable nodes stay zero, so recycled memory is cleared.
	p.free = zeroed(p.free, len(p.nodes)*p.nres)
	p.slots = zeroed(p.slots, len(p.nodes))
	p.largest = make([]int64, p.nres)
	for r, name := range p.resNames {
		col, ok := t.cols[name]
		if !ok {
			p.extraResidual(r, name)
			continue
		}
		for i := range p.nodes {
			if !t.usable(i) {
				continue // no room: see NodeTable.Unusable
			}
			alloc, used := t.alloc[i*t.ncols+col], t.used[i*t.ncols+col]
			// Both are non-negative on a usable node, so the difference
			// cannot overflow.
			p.free[i*p.nres+r] = alloc - used
			p.largest[r] = max(p.largest[r], alloc)
		}
	}
	for i, n := range p.nodes {
		if t.usable(i) {
			p.slots[i] = min(int64(n.MaxPods)-int64(n.PodCount), maxCount)
		}
	}
	for _, u := range p.reserved {
		i, ok := p.nodeIndex(u.Node)
		if !ok {
			continue
		}
		if u.Pods < 0 {
			return fmt.Errorf("placement: usage on node %q: negative pods", u.Node)
		}
		p.slots[i] -= int64(u.Pods)
		for name, v := range u.Requested {
			if v < 0 {
				return fmt.Errorf("placement: usage on node %q: negative %s", u.Node, name)
			}
			if r, ok := p.resIdx[name]; ok {
				p.free[int(i)*p.nres+r] -= v
			}
		}
	}
	return nil
}

// extraResidual fills resource r, which no node of the table lists, from
// Options.Extra; without an entry a node has none of it.
func (p *planner) extraResidual(r int, name corev1.ResourceName) {
	for i, n := range p.nodes {
		room, ok := p.opts.Extra[n.Name]
		if !ok || !p.table.usable(i) {
			continue
		}
		alloc := max(0, room.Allocatable[name])
		p.free[i*p.nres+r] = alloc - max(0, room.Requested[name])
		p.largest[r] = max(p.largest[r], alloc)
	}
}

func (p *planner) initShapes() {
	largest := p.largest
	var objs []*corev1.Node // built lazily: only selectors and affinity need them
	for _, s := range p.shapes {
		for _, r := range s.reqs {
			share := math.Inf(1)
			if largest[r.idx] > 0 {
				share = float64(r.amt) / float64(largest[r.idx])
			}
			s.share = max(s.share, share)
		}
		var aff *nodeaffinity.RequiredNodeAffinity
		if len(s.spec.NodeSelector) > 0 || s.spec.RequiredAffinity != nil {
			var affinity *corev1.Affinity
			if s.spec.RequiredAffinity != nil {
				affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: s.spec.RequiredAffinity}}
			}
			a := nodeaffinity.NewRequiredNodeAffinity(s.spec.NodeSelector, affinity)
			aff = &a
			if objs == nil {
				objs = make([]*corev1.Node, len(p.nodes))
				for i, n := range p.nodes {
					objs[i] = &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.Name, Labels: n.Labels}}
				}
			}
		}
		s.eligible = make([]bool, len(p.nodes))
		for i, n := range p.nodes {
			if cap, ok := s.spec.NodeLimit[n.Name]; ok && cap <= 0 {
				continue
			}
			ok := p.tolerates(s.spec, n)
			if ok && aff != nil {
				// A parse error in a term means the term does not match,
				// as in the NodeAffinity filter.
				ok, _ = aff.Match(objs[i])
			}
			if _, blocked := s.spec.BlockedBy[n.Name]; blocked {
				// Eligible only once preemption evicts what blocks it.
				if ok {
					if s.clearable == nil {
						s.clearable = map[int32]bool{}
					}
					s.clearable[int32(i)] = true
				}
				continue
			}
			s.eligible[i] = ok
			if ok {
				s.eligibleCount++
			}
		}
	}
}

var unschedulableTaint = corev1.Taint{Key: corev1.TaintNodeUnschedulable, Effect: corev1.TaintEffectNoSchedule}

// tolerates mirrors the NodeUnschedulable and TaintToleration filters: only
// NoSchedule and NoExecute taints repel, and a pod that tolerates the
// unschedulable taint may use a cordoned node.
func (p *planner) tolerates(s *Shape, n *Node) bool {
	cmp := p.opts.TaintComparisonOperators
	if n.Unschedulable && !tolerated(corev1helpers.TolerationsTolerateTaint, s.Tolerations, &unschedulableTaint, cmp) {
		return false
	}
	for i := range n.Taints {
		t := &n.Taints[i]
		if t.Effect != corev1.TaintEffectNoSchedule && t.Effect != corev1.TaintEffectNoExecute {
			continue
		}
		if !tolerated(corev1helpers.TolerationsTolerateTaint, s.Tolerations, t, cmp) {
			return false
		}
	}
	return true
}

// tolerated calls the upstream helper with a zero logger. The logger type is
// inferred from the helper's signature, which keeps a logging dependency out
// of this package; the helper only logs unparsable Lt/Gt values, which then
// simply do not match.
func tolerated[L any](match func(L, []corev1.Toleration, *corev1.Taint, bool) bool, tols []corev1.Toleration, t *corev1.Taint, cmp bool) bool {
	var quiet L
	return match(quiet, tols, t, cmp)
}

// count is how many more pods of shape s node n holds under the current
// residuals. For one shape this is exact, which is what makes gang
// feasibility exact for homogeneous groups.
func (p *planner) count(s *shapeInfo, n int32) int64 {
	c := p.roomFor(s, n)
	if c > 0 && (s.nodeCap != nil || s.limits != nil) {
		c = p.constrain(s, n, c)
	}
	return c
}

// roomFor is count before member-to-member constraints: what the node's
// residual resources and pod slots allow.
func (p *planner) roomFor(s *shapeInfo, n int32) int64 {
	if !s.eligible[n] {
		return 0
	}
	c := p.slots[n]
	if c <= 0 {
		return 0
	}
	row := p.free[int(n)*p.nres:]
	for _, r := range s.reqs {
		f := row[r.idx]
		if f < r.amt {
			return 0
		}
		if q := f / r.amt; q < c {
			c = q
		}
	}
	return c
}

// take places the next m pending pods of leaf g's local shape li on node n.
// The caller guarantees m <= count, so residuals stay non-negative.
func (p *planner) take(g *gnode, li int, n int32, m int) {
	s := p.shapes[g.gshape[li]]
	row := p.free[int(n)*p.nres:]
	for _, r := range s.reqs {
		row[r.idx] -= int64(m) * r.amt
	}
	p.slots[n] -= int64(m)
	p.tally(s, n, int32(m))
	for range m {
		p.log = append(p.log, assignment{pod: g.byShape[li][g.cursor[li]], node: n})
		g.cursor[li]++
	}
}

// rollback undoes every placement after mark, restoring residuals and cursors.
func (p *planner) rollback(mark int) {
	for i := len(p.log) - 1; i >= mark; i-- {
		a := p.log[i]
		pi := p.pods[a.pod]
		g := pi.leaf
		g.cursor[pi.local]--
		row := p.free[int(a.node)*p.nres:]
		s := p.shapes[g.gshape[pi.local]]
		for _, r := range s.reqs {
			row[r.idx] += r.amt
		}
		p.slots[a.node]++
		p.tally(s, a.node, -1)
	}
	p.log = p.log[:mark]
}

// zeroed returns n zeros in s's memory when it has room, else new memory.
func zeroed(s []int64, n int) []int64 {
	if cap(s) < n {
		return make([]int64, n)
	}
	s = s[:n]
	clear(s)
	return s
}
