package bench

import (
	"context"
	"sort"
	"sync"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/phalanx-sched/phalanx/tools/bench/report"
)

// maxBindTries bounds how often the binder retries one pod.
const maxBindTries = 5

// ceilingPlan assigns every pod of the case a node without asking the
// cluster, from the case's own numbers: plain pods and unconstrained gangs
// go round-robin over the nodes with room; a topology-constrained gang
// gets one rack (from gang index modulo racks, the first one from there
// with room for the whole gang) and goes round-robin over its nodes. A
// node holds as many pods as its cpu, pod count and GPUs allow, so the
// plan never overcommits a node (with mixed gang sizes, "gang index modulo
// racks" alone put two large gangs in one rack). A gang's members go to
// consecutive nodes with room, so an anti-affine gang no larger than its
// nodes lands one member per node. It is the cheapest placement that
// still passes the placement check, so the binder measures only what the
// API server can bind. A gang that fits nowhere gets node "" for every
// member.
func ceilingPlan(c Case) (pods, nodes []string) {
	all := c.topology().Nodes()
	names := make([]string, len(all))
	free := make(map[string]int, len(all))
	byDomain := map[string][]string{}
	slots := c.slotsPerNode()
	for i, n := range all {
		names[i] = n.Name
		free[n.Name] = slots
		if c.TopologyKey != "" {
			v := n.Labels[c.TopologyKey]
			byDomain[v] = append(byDomain[v], n.Name)
		}
	}
	domains := make([]string, 0, len(byDomain))
	for d := range byDomain {
		domains = append(domains, d)
	}
	sort.Strings(domains)

	// take returns the next node of ring (from *cursor on) with room, and
	// moves the cursor past it; "" when the ring is full.
	take := func(ring []string, cursor *int) string {
		for k := 0; k < len(ring); k++ {
			n := ring[(*cursor+k)%len(ring)]
			if free[n] > 0 {
				free[n]--
				*cursor = (*cursor + k + 1) % len(ring)
				return n
			}
		}
		return ""
	}
	room := func(ring []string) int {
		r := 0
		for _, n := range ring {
			r += free[n]
		}
		return r
	}

	podNames, gangs := c.podNames()
	next := 0
	nextIn := map[string]int{}
	for i, gi := 0, 0; i < len(podNames); {
		end := i + 1
		for gangs[i] != "" && end < len(podNames) && gangs[end] == gangs[i] {
			end++
		}
		ring, cursor := names, &next
		var domain string
		if c.TopologyKey != "" && gangs[i] != "" {
			domain = domains[gi%len(domains)]
			for k := range domains {
				if cand := domains[(gi+k)%len(domains)]; room(byDomain[cand]) >= end-i {
					domain = cand
					break
				}
			}
			at := nextIn[domain]
			ring, cursor = byDomain[domain], &at
		}
		// A gang no domain has room for (a 12-pod gang on racks of 8
		// one-pod nodes) is left unbound, whole, as a gang scheduler
		// leaves it: node "" tells the binder to skip the pod.
		fits := room(ring) >= end-i
		for j := i; j < end; j++ {
			pods = append(pods, podNames[j])
			node := ""
			if fits {
				node = take(ring, cursor)
			}
			nodes = append(nodes, node)
		}
		if domain != "" {
			nextIn[domain] = *cursor
		}
		if gangs[i] != "" {
			gi++
		}
		i = end
	}
	return pods, nodes
}

// slotsPerNode is how many of the case's measured pods one node holds.
func (c Case) slotsPerNode() int {
	nodeCPU := resource.MustParse(nodeCPU)
	podCPU := resource.MustParse(c.podCPU())
	slots := nodePods
	if p := podCPU.MilliValue(); p > 0 {
		slots = min(slots, int(nodeCPU.MilliValue()/p))
	}
	if c.GPUs != nil && c.GPUs.PerPod > 0 {
		slots = min(slots, c.GPUs.PerNode/c.GPUs.PerPod)
	}
	return slots
}

// binder is the bind ceiling: workers POST pods/binding as fast as the API
// server takes them, with no scheduling at all. In a DRA case each bind is
// preceded by the one write a scheduler must make too: the pod's claim
// allocated and reserved for it (claimAllocator).
type binder struct {
	cancel context.CancelFunc
	done   chan struct{}
	tries  atomic.Int64
	binds  atomic.Int64
	// claims, in a DRA case, allocates each pod's claim before its bind.
	claims *claimAllocator
}

// startBinder starts the binder. With created nil every pod exists
// already (precreated) and is bound in order; otherwise the binder binds
// pod i (in c.podNames order) once it is received from created, which the
// live creator closes when done.
func startBinder(ctx context.Context, client kubernetes.Interface, ns string, c Case, workers int, created <-chan int) (*binder, error) {
	ctx, cancel := context.WithCancel(ctx)
	b := &binder{cancel: cancel, done: make(chan struct{})}
	pods, nodes := ceilingPlan(c)
	if c.dra() {
		var err error
		if b.claims, err = startClaimAllocator(ctx, client, ns, c, pods, nodes); err != nil {
			cancel()
			return nil, err
		}
	}
	work := make(chan int)
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				b.bind(ctx, client, ns, pods[i], nodes[i])
			}
		}()
	}
	go func() {
		defer close(b.done)
		defer wg.Wait()
		defer close(work)
		if created == nil {
			ready := make(chan int, len(pods))
			for i := range pods {
				ready <- i
			}
			close(ready)
			created = ready
		}
		for {
			var i int
			var ok bool
			select {
			case i, ok = <-created:
				if !ok {
					return
				}
			case <-ctx.Done():
				return
			}
			select {
			case work <- i:
			case <-ctx.Done():
				return
			}
		}
	}()
	return b, nil
}

func (b *binder) bind(ctx context.Context, client kubernetes.Interface, ns, pod, node string) {
	if node == "" {
		return // its gang fits nowhere (ceilingPlan)
	}
	binding := &corev1.Binding{
		ObjectMeta: metav1.ObjectMeta{Name: pod, Namespace: ns},
		Target:     corev1.ObjectReference{Kind: "Node", Name: node},
	}
	if b.claims != nil {
		allocated := false
		for try := 0; try < maxBindTries && ctx.Err() == nil && !allocated; try++ {
			allocated = b.claims.allocate(ctx, pod, node) == nil
		}
		if !allocated {
			return
		}
	}
	for try := 0; try < maxBindTries && ctx.Err() == nil; try++ {
		b.tries.Add(1)
		err := client.CoreV1().Pods(ns).Bind(ctx, binding, metav1.CreateOptions{})
		if err == nil {
			b.binds.Add(1)
			return
		}
		if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
			// Already bound, or gone: nothing more to do.
			return
		}
	}
}

func (b *binder) stop() {
	b.cancel()
	<-b.done
	if b.claims != nil {
		b.claims.stop()
	}
}

// metrics reports bind calls per bound pod as attempts.
func (b *binder) metrics() *report.SchedulerMetrics {
	a := &report.SchedulerMetrics{Scheduled: float64(b.binds.Load()), Source: "binder: bind calls per bound pod"}
	if n := b.binds.Load(); n > 0 {
		a.AttemptsPerBoundPod = float64(b.tries.Load()) / float64(n)
	}
	return a
}
