package gang

import (
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/labels"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/phalanx-sched/phalanx/pkg/gangcore"
	"github.com/phalanx-sched/phalanx/pkg/groups"
	"github.com/phalanx-sched/phalanx/pkg/placement"
)

// A gang larger than the cluster.
//
// The planner answers "does the gang fit now", against free room, so a
// gang that no amount of waiting or preemption could place is planned (and
// its members tried) again after every change of any node, forever. Its
// minimum is compared with the nodes' allocatable instead, once per change
// of the node set or of a node's allocatable: when even empty nodes could
// not hold it, every member is rejected in PreFilter, before the planner
// runs, with the numbers in the group's status; a node added or grown
// requeues the members (the plugin registers those events).

// capacity caches the cluster's allocatable per node and the verdicts on
// gangs against it.
type capacity struct {
	nodes corelisters.NodeLister

	mu sync.Mutex
	// gen moves with every node added, deleted or resized.
	gen      uint64
	alloc    []placement.Resources // per node, at allocGen
	allocGen uint64
	allocOK  bool
	// verdicts remembers a leaf gang's answer at a hierarchy revision and
	// node generation: a 20,000-member gang is checked once, not per member.
	verdicts map[groups.Key]capacityVerdict
}

type capacityVerdict struct {
	rev, gen uint64
	msg      string
}

func newCapacity(nodes corelisters.NodeLister) *capacity {
	return &capacity{nodes: nodes, verdicts: map[groups.Key]capacityVerdict{}}
}

// watch bumps the node generation on the changes that can alter what the
// cluster could hold.
func (c *capacity) watch(inf cache.SharedIndexInformer) error {
	_, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(interface{}) { c.bump() },
		UpdateFunc: func(oldObj, newObj interface{}) {
			o, ok1 := oldObj.(*corev1.Node)
			n, ok2 := newObj.(*corev1.Node)
			if !ok1 || !ok2 || !equality.Semantic.DeepEqual(o.Status.Allocatable, n.Status.Allocatable) {
				c.bump()
			}
		},
		DeleteFunc: func(interface{}) { c.bump() },
	})
	return err
}

func (c *capacity) bump() {
	c.mu.Lock()
	c.gen++
	c.mu.Unlock()
}

// forget drops the verdict of a group that is gone.
func (c *capacity) forget(k groups.Key) {
	c.mu.Lock()
	delete(c.verdicts, k)
	c.mu.Unlock()
}

func (c *capacity) size() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.verdicts)
}

// allocatable returns every node's allocatable as of the current
// generation. A handler bumps the generation after the informer's store
// changed, so a list taken after reading the generation is at least as new.
func (c *capacity) allocatable() ([]placement.Resources, uint64, error) {
	c.mu.Lock()
	gen := c.gen
	if c.allocOK && c.allocGen == gen {
		alloc := c.alloc
		c.mu.Unlock()
		return alloc, gen, nil
	}
	c.mu.Unlock()
	list, err := c.nodes.List(labels.Everything())
	if err != nil {
		return nil, 0, err
	}
	alloc := make([]placement.Resources, 0, len(list))
	for _, n := range list {
		r := placement.Resources{}
		for name, q := range n.Status.Allocatable {
			if name == corev1.ResourceCPU {
				r[name] = q.MilliValue()
			} else {
				r[name] = q.Value()
			}
		}
		alloc = append(alloc, r)
	}
	c.mu.Lock()
	if c.gen == gen {
		c.alloc, c.allocGen, c.allocOK = alloc, gen, true
	}
	c.mu.Unlock()
	return alloc, gen, nil
}

// exceeds returns why the leaf gang g can never reach its minimum on the
// cluster's nodes even if they were empty, "" when it might. members are
// g's live members; rev is its hierarchy revision (ok false: unknown, so
// not remembered).
func (c *capacity) exceeds(g groups.Info, rev uint64, revOK bool, members func() []*corev1.Pod) (string, error) {
	if !g.Gang || g.MinCount <= 0 {
		return "", nil
	}
	alloc, gen, err := c.allocatable()
	if err != nil {
		return "", err
	}
	if memo, msg := c.memoAt(g.Key, gen); memo.Covers(rev, revOK) {
		return msg, nil
	}
	return c.judge(g, rev, revOK, alloc, gen, members()), nil
}

// memoAt is the verdict remembered for leaf gang k at node generation gen,
// as a memo of the hierarchy revision it holds at, and its message.
func (c *capacity) memoAt(k groups.Key, gen uint64) (groups.Memo, string) {
	c.mu.Lock()
	v, seen := c.verdicts[k]
	c.mu.Unlock()
	if !seen || v.gen != gen {
		return groups.Memo{}, ""
	}
	return groups.Memo{Rev: v.rev, OK: true}, v.msg
}

// judge decides whether g's minimum of members could fit in alloc, the
// nodes' allocatable at generation gen, and remembers the verdict under
// rev when it is known.
func (c *capacity) judge(g groups.Info, rev uint64, revOK bool, alloc []placement.Resources, gen uint64, members []*corev1.Pod) string {
	msg := gangcore.ExceedsAllocatable(g.MinCount, requestsOf(members), alloc)
	c.remember(g, rev, revOK, gen, msg)
	return msg
}

// remember keeps msg as g's size verdict at revision rev and node
// generation gen, when rev is known.
func (c *capacity) remember(g groups.Info, rev uint64, revOK bool, gen uint64, msg string) {
	if !revOK {
		return
	}
	c.mu.Lock()
	c.verdicts[g.Key] = capacityVerdict{rev: rev, gen: gen, msg: msg}
	c.mu.Unlock()
}

// requestsOf are the requests of each of members, as the planner reads them.
func requestsOf(members []*corev1.Pod) []placement.Resources {
	out := make([]placement.Resources, len(members))
	for i, m := range members {
		out[i] = placement.PodRequests(m)
	}
	return out
}
