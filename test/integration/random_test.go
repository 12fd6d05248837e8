package integration

import (
	"context"
	"fmt"
	"math/rand"
	"os"
	"sort"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	v1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
	"github.com/phalanx-sched/phalanx/pkg/sandbox"
)

// randomGroup is what the runner created, to check invariants against.
type randomGroup struct {
	name     string
	gang     bool
	minCount int
	size     int
	key      string // topology key, "" when unconstrained
	cpu      int64  // milli-cpu per pod
	// disturbed is set once a member of a bound gang was deleted: re-created
	// members may then legitimately leave it below minCount.
	disturbed bool
}

// TestRandomizedInvariants drives the real plugins with random streams of
// actions on random clusters and checks, at every quiescent point, that:
// no gang is bound below minCount; no node is overcommitted; no topology
// constraint is violated; every pending PodGroup has a condition saying
// why. Seeds are printed; PHALANX_RANDOM_SEEDS sets how many run (make soak
// runs 200), PHALANX_RANDOM_SEED replays one.
func TestRandomizedInvariants(t *testing.T) {
	seeds := 20
	if v, err := strconv.Atoi(os.Getenv("PHALANX_RANDOM_SEEDS")); err == nil && v > 0 {
		seeds = v
	}
	first := time.Now().UnixNano() % 100000
	if v, err := strconv.ParseInt(os.Getenv("PHALANX_RANDOM_SEED"), 10, 64); err == nil {
		first, seeds = v, 1
	}
	c := startCluster(t, sandbox.Options{Scheduler: true, NodeAgent: true})
	violations := 0
	for i := 0; i < seeds; i++ {
		seed := first + int64(i)
		ok := t.Run(fmt.Sprintf("seed %d", seed), func(t *testing.T) {
			runRandomSeed(t, c, seed)
		})
		if !ok {
			violations++
		}
	}
	t.Logf("%d seeds run from %d, %d with invariant violations", seeds, first, violations)
}

func runRandomSeed(t *testing.T, c *sandbox.Cluster, seed int64) {
	t.Logf("replay with PHALANX_RANDOM_SEED=%d", seed)
	ctx := context.Background()
	rng := rand.New(rand.NewSource(seed))
	ns := namespace(t, c)
	t.Cleanup(func() {
		_ = c.Client.CoreV1().Pods(ns).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}, metav1.ListOptions{})
	})

	// A fresh random cluster: its nodes carry this seed's prefix.
	prefix := fmt.Sprintf("s%d", seed)
	racks := 1 + rng.Intn(3)
	perRack := 1 + rng.Intn(3)
	var nodes []*corev1.Node
	for r := 0; r < racks; r++ {
		for n := 0; n < perRack; n++ {
			name := fmt.Sprintf("%s-r%d-n%d", prefix, r, n)
			nodes = append(nodes, sandbox.NewNode(name, map[string]string{
				sandbox.HostnameLabel: name, sandbox.RackLabel: fmt.Sprintf("%s-rack-%d", prefix, r), "seed": prefix,
			}, corev1.ResourceList{
				corev1.ResourceCPU:    *resourceMilli(4000),
				corev1.ResourceMemory: *resourceBytes(32 << 30),
				corev1.ResourcePods:   *resourceCount(110),
			}))
		}
	}
	require.NoError(t, sandbox.CreateNodes(ctx, c.Client, nodes))
	t.Cleanup(func() {
		for _, n := range nodes {
			_ = c.Client.CoreV1().Nodes().Delete(ctx, n.Name, metav1.DeleteOptions{})
		}
	})

	groupsMade := map[string]*randomGroup{}
	actions := 3 + rng.Intn(4)
	for a := 0; a < actions; a++ {
		switch op := rng.Intn(10); {
		case op < 6: // a gang or basic group
			g := &randomGroup{name: fmt.Sprintf("g%d", a), gang: rng.Intn(4) != 0, size: 1 + rng.Intn(5), cpu: int64(500 * (1 + rng.Intn(8)))}
			g.minCount = 1 + rng.Intn(g.size)
			if rng.Intn(2) == 0 {
				g.key = sandbox.RackLabel
			}
			pg := &v1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Name: g.name}}
			if g.gang {
				pg.Spec.SchedulingPolicy.Gang = &v1alpha1.GangSchedulingPolicy{MinCount: int32(g.minCount)}
			} else {
				pg.Spec.SchedulingPolicy.Basic = &v1alpha1.BasicSchedulingPolicy{}
			}
			if g.key != "" {
				pg.Spec.SchedulingConstraints = &v1alpha1.PodGroupSchedulingConstraints{Topology: topo(g.key)}
			}
			createPodGroup(t, c, ns, pg)
			for i := 0; i < g.size; i++ {
				createSeedPod(t, c, ns, prefix, fmt.Sprintf("%s-%d", g.name, i), inGroup(g.name), g.cpu)
			}
			groupsMade[g.name] = g
		case op < 8: // plain pods
			for i := 0; i < 1+rng.Intn(3); i++ {
				createSeedPod(t, c, ns, prefix, fmt.Sprintf("plain%d-%d", a, i), nil, int64(500*(1+rng.Intn(8))))
			}
		default: // delete a pod of some group
			names := make([]string, 0, len(groupsMade))
			for n := range groupsMade {
				names = append(names, n)
			}
			sort.Strings(names)
			if len(names) == 0 {
				continue
			}
			g := groupsMade[names[rng.Intn(len(names))]]
			victim := fmt.Sprintf("%s-%d", g.name, rng.Intn(g.size))
			if _, bound := boundPods(t, c, ns)[victim]; bound {
				g.disturbed = true
			}
			_ = c.Client.CoreV1().Pods(ns).Delete(ctx, victim, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
		}
		quiesce(t, c, ns)
		checkInvariants(t, c, ns, prefix, groupsMade)
	}
}

func createSeedPod(t *testing.T, c *sandbox.Cluster, ns, prefix, name string, labels map[string]string, milli int64) {
	p := member{name: name, labels: labels, cpu: fmt.Sprintf("%dm", milli)}.pod()
	p.Spec.NodeSelector = map[string]string{"seed": prefix}
	_, err := c.Client.CoreV1().Pods(ns).Create(context.Background(), p, metav1.CreateOptions{})
	require.NoError(t, err)
}

// quiesce waits until the set of bound pods has not changed for a while.
func quiesce(t *testing.T, c *sandbox.Cluster, ns string) {
	last, stableSince := "", time.Now()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		cur := fmt.Sprint(boundPods(t, c, ns))
		if cur != last {
			last, stableSince = cur, time.Now()
		} else if time.Since(stableSince) > time.Second {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func checkInvariants(t *testing.T, c *sandbox.Cluster, ns, prefix string, made map[string]*randomGroup) {
	t.Helper()
	ctx := context.Background()
	pods, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	nodes, err := c.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: "seed=" + prefix})
	require.NoError(t, err)
	labels := map[string]map[string]string{}
	used := map[string]int64{}
	for _, n := range nodes.Items {
		labels[n.Name] = n.Labels
	}
	bound := map[string]int{}
	pending := map[string]int{}
	domains := map[string]map[string]bool{}
	for _, p := range pods.Items {
		if p.DeletionTimestamp != nil {
			continue
		}
		if p.Spec.NodeName == "" {
			pending[p.Labels[v1alpha1.PodGroupLabel]]++
			continue
		}
		used[p.Spec.NodeName] += p.Spec.Containers[0].Resources.Requests.Cpu().MilliValue()
		if g := p.Labels[v1alpha1.PodGroupLabel]; g != "" {
			bound[g]++
			if made[g] != nil && made[g].key != "" {
				if domains[g] == nil {
					domains[g] = map[string]bool{}
				}
				domains[g][labels[p.Spec.NodeName][made[g].key]] = true
			}
		}
	}
	for _, n := range nodes.Items {
		require.LessOrEqual(t, used[n.Name], n.Status.Allocatable.Cpu().MilliValue(), "node %s is overcommitted", n.Name)
	}
	for name, g := range made {
		if g.gang && !g.disturbed && bound[name] > 0 {
			require.GreaterOrEqual(t, bound[name], g.minCount, "gang %s is bound below its minCount", name)
		}
		require.LessOrEqual(t, len(domains[name]), 1, "group %s spans domains %v", name, domains[name])
		if bound[name] == 0 && pending[name] > 0 {
			pg, err := c.Phalanx.SchedulingV1alpha1().PodGroups(ns).Get(ctx, name, metav1.GetOptions{})
			require.NoError(t, err)
			// The condition is written asynchronously; give it a moment.
			eventually(t, 10*time.Second, "a condition explaining why "+name+" is pending", func() (bool, error) {
				pg, err = c.Phalanx.SchedulingV1alpha1().PodGroups(ns).Get(ctx, name, metav1.GetOptions{})
				if err != nil {
					return false, err
				}
				cond := meta.FindStatusCondition(pg.Status.Conditions, v1alpha1.PodGroupSchedulable)
				return cond != nil && cond.Status == metav1.ConditionFalse && cond.Message != "", nil
			})
		}
	}
}

func resourceMilli(v int64) *resource.Quantity {
	return resource.NewMilliQuantity(v, resource.DecimalSI)
}
func resourceBytes(v int64) *resource.Quantity { return resource.NewQuantity(v, resource.BinarySI) }
func resourceCount(v int64) *resource.Quantity { return resource.NewQuantity(v, resource.DecimalSI) }
