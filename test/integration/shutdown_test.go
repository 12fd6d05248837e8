package integration

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	v1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
	"github.com/phalanx-sched/phalanx/pkg/graceful"
	"github.com/phalanx-sched/phalanx/tools/sandbox"
)

// boundWatch follows the bindings of one namespace with an informer, so
// a test can act at a precise point of a gang's binds without listing a
// thousand pods in a loop.
type boundWatch struct {
	mu      sync.Mutex
	bound   map[string]string
	changed chan struct{}
}

func watchBound(t *testing.T, c *sandbox.Cluster, ns string) *boundWatch {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	b := &boundWatch{bound: map[string]string{}, changed: make(chan struct{})}
	seen := func(obj interface{}) {
		p, ok := obj.(*corev1.Pod)
		if !ok || p.Spec.NodeName == "" {
			return
		}
		b.mu.Lock()
		defer b.mu.Unlock()
		if b.bound[p.Name] == "" {
			b.bound[p.Name] = p.Spec.NodeName
			close(b.changed)
			b.changed = make(chan struct{})
		}
	}
	factory := informers.NewSharedInformerFactoryWithOptions(c.Client, 0, informers.WithNamespace(ns))
	pods := factory.Core().V1().Pods().Informer()
	_, err := pods.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    seen,
		UpdateFunc: func(_, obj interface{}) { seen(obj) },
	})
	require.NoError(t, err)
	factory.Start(ctx.Done())
	require.True(t, cache.WaitForCacheSync(ctx.Done(), pods.HasSynced))
	return b
}

// waitCount waits until at least n pods whose name starts with prefix
// are bound.
func (b *boundWatch) waitCount(t *testing.T, prefix string, n int, timeout time.Duration) {
	t.Helper()
	deadline := time.After(timeout)
	for {
		b.mu.Lock()
		have := 0
		for name := range b.bound {
			if strings.HasPrefix(name, prefix) {
				have++
			}
		}
		changed := b.changed
		b.mu.Unlock()
		if have >= n {
			return
		}
		select {
		case <-changed:
		case <-deadline:
			t.Fatalf("only %d pods %s* bound after %v, waiting for %d", have, prefix, timeout, n)
		}
	}
}

// createGangFast creates a PodGroup and its size members (named
// <name>-<i>, in the order of i) from a few goroutines: creating a
// thousand pods one by one takes longer than the test should.
func createGangFast(t *testing.T, c *sandbox.Cluster, ns string, pg *v1alpha1.PodGroup, size int, cpu string) {
	t.Helper()
	createPodGroup(t, c, ns, pg)
	const workers = 8
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := w; i < size; i += workers {
				m := member{name: fmt.Sprintf("%s-%d", pg.Name, i), labels: inGroup(pg.Name), cpu: cpu}
				if _, err := c.Client.CoreV1().Pods(ns).Create(context.Background(), m.pod(), metav1.CreateOptions{}); err != nil {
					errs <- fmt.Errorf("create %s: %w", m.name, err)
					return
				}
			}
		}(w)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
}

// countBound returns, per name prefix, how many pods of ns are bound.
func countBound(t *testing.T, c *sandbox.Cluster, ns string, prefixes ...string) map[string]int {
	t.Helper()
	out := map[string]int{}
	for name := range boundPods(t, c, ns) {
		for _, p := range prefixes {
			if strings.HasPrefix(name, p) {
				out[p]++
			}
		}
	}
	return out
}

// TestGracefulStopMidGangBinds stops the scheduler as SIGTERM does while
// a 1,000-pod gang is binding (a tenth of it bound, the rest queued for a
// bind slot) and a second gang of 50 is on its way: every gang ends fully
// bound or not bound at all, and the restarted scheduler binds what is
// left. Before the graceful stop, the members still queued for a slot
// gave up with the scheduler's context, and the gang stayed partial.
func TestGracefulStopMidGangBinds(t *testing.T) {
	c := startCluster(t, sandbox.Options{Scheduler: true, Topology: &sandbox.Topology{
		Zones: 1, RacksPerZone: 1, NodesPerRack: 10, CPU: "2", Memory: "16Gi", Pods: 250}})
	ns := namespace(t, c)
	bound := watchBound(t, c, ns)
	createGangFast(t, c, ns, gangPG("big", 1000), 1000, "10m")
	createGangFast(t, c, ns, gangPG("next", 50), 50, "10m")

	bound.waitCount(t, "big-", 100, 3*time.Minute)
	report := c.TerminateScheduler()
	t.Logf("drain: %d bound, %d failed, %d left, in %v", report.Bound, report.Failed, len(report.Left), report.Took.Round(time.Millisecond))
	assert.Empty(t, report.Left, "every bind let through finished within the drain timeout")
	assert.Positive(t, report.Bound, "the stop came in the middle of the binds")

	after := countBound(t, c, ns, "big-", "next-")
	assert.Equal(t, 1000, after["big-"], "the gang that was binding is bound whole")
	assert.Contains(t, []int{0, 50}, after["next-"], "the second gang is bound whole or not at all")
	consistently(t, time.Second, "nothing binds while no scheduler runs", func() bool {
		now := countBound(t, c, ns, "big-", "next-")
		return now["big-"] == after["big-"] && now["next-"] == after["next-"]
	})

	_, err := c.StartScheduler(context.Background())
	require.NoError(t, err)
	bound.waitCount(t, "next-", 50, 2*time.Minute)
	assert.Equal(t, 1050, len(boundPods(t, c, ns)), "the restarted scheduler bound what was pending")
}

// TestKilledMidGangBindsCompletedFirst kills the scheduler (no drain, as
// SIGKILL) while a rack-constrained 1,000-pod gang is binding, which
// leaves it partly bound. While no scheduler runs, the other rack fills up
// and an older pod becomes schedulable that would fit exactly where the
// gang's unbound members must go. The restarted scheduler completes the
// gang first, in its rack; the older pod stays pending.
func TestKilledMidGangBindsCompletedFirst(t *testing.T) {
	c := startCluster(t, sandbox.Options{Scheduler: true, Topology: &sandbox.Topology{
		Zones: 1, RacksPerZone: 2, NodesPerRack: 5, CPU: "2", Memory: "16Gi", Pods: 250}})
	ctx := context.Background()
	ns := namespace(t, c)
	bound := watchBound(t, c, ns)
	// Older than the gang, so it would sort before it on creation time
	// (which has a resolution of one second).
	createPods(t, c, ns, member{name: "rival", cpu: "10m", gated: true})
	time.Sleep(1100 * time.Millisecond)
	pg := gangPG("big", 1000)
	pg.Spec.SchedulingConstraints = &v1alpha1.PodGroupSchedulingConstraints{Topology: topo(sandbox.RackLabel)}
	createGangFast(t, c, ns, pg, 1000, "10m")

	bound.waitCount(t, "big-", 100, 3*time.Minute)
	c.StopScheduler()
	time.Sleep(time.Second) // requests the API server accepted before the kill complete
	partial := countBound(t, c, ns, "big-")["big-"]
	t.Logf("the kill left %d of 1000 bound", partial)
	require.Less(t, partial, 1000, "the kill came in the middle of the binds")
	racks := domainsOf(t, c, ns, "big-", sandbox.RackLabel)
	require.Len(t, racks, 1)
	var gangRack string
	for r := range racks {
		gangRack = r
	}

	// The other rack fills up, bound directly as kubelet-managed pods are.
	nodes, err := c.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	for _, n := range nodes.Items {
		if n.Labels[sandbox.RackLabel] != gangRack {
			p := member{name: "fill-" + n.Name, cpu: "2"}.pod()
			p.Spec.NodeName = n.Name
			_, err := c.Client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
			require.NoError(t, err)
		}
	}
	_, err = c.Client.CoreV1().Pods(ns).Patch(ctx, "rival", types.JSONPatchType,
		[]byte(`[{"op":"remove","path":"/spec/schedulingGates"}]`), metav1.PatchOptions{})
	require.NoError(t, err)

	_, err = c.StartScheduler(ctx)
	require.NoError(t, err)
	bound.waitCount(t, "big-", 1000, 3*time.Minute)
	assert.Equal(t, map[string]int{gangRack: 1000}, domainsOf(t, c, ns, "big-", sandbox.RackLabel), "the gang was completed in its rack")
	consistently(t, 2*time.Second, "the older pod stays pending: the gang's room was not taken", func() bool {
		return boundPods(t, c, ns)["rival"] == ""
	})
}

// TestSchedulerProcessDrainsOnSIGTERM sends SIGTERM to a leading
// phalanx-scheduler process (the second-scheduler overlay's configuration
// and identity) in the middle of a 300-pod gang's binds: the process
// finishes the binds, says so, releases its Lease and exits 0.
func TestSchedulerProcessDrainsOnSIGTERM(t *testing.T) {
	bin := buildBinary(t, "phalanx-scheduler")
	c := startCluster(t, sandbox.Options{Topology: &sandbox.Topology{
		Zones: 1, RacksPerZone: 1, NodesPerRack: 4, CPU: "4", Memory: "16Gi", Pods: 110}})
	objs := applyRBAC(t, c, "manifests/overlays/second-scheduler")
	_, kubeconfig := serviceAccountConfig(t, c, systemNamespace, schedulerSA)
	path := processSchedulerConfig(t, renderedSchedulerConfig(t, objs), kubeconfig, nil)
	s := startSchedulerProcess(t, "scheduler", bin, path, kubeconfig)
	eventually(t, 60*time.Second, "the process to take the Lease", func() (bool, error) {
		holder, err := leaseHolder(c, schedulerLease)
		return holder != "", err
	})

	ns := namespace(t, c)
	bound := watchBound(t, c, ns)
	createGangFast(t, c, ns, gangPG("g", 300), 300, "10m")
	bound.waitCount(t, "g-", 30, 3*time.Minute)
	require.NoError(t, s.cmd.Process.Signal(syscall.SIGTERM))
	select {
	case <-s.done:
	case <-time.After(graceful.DefaultDrainTimeout + 30*time.Second):
		t.Fatal("the process did not exit after SIGTERM")
	}
	assert.Equal(t, 0, s.cmd.ProcessState.ExitCode())
	assert.Equal(t, 300, countBound(t, c, ns, "g-")["g-"], "the gang that was binding is bound whole")
	log, err := os.ReadFile(s.log)
	require.NoError(t, err)
	drained := regexp.MustCompile(`"Graceful stop: binds drained" bound=(\d+)`).FindStringSubmatch(string(log))
	require.NotNil(t, drained, "the process logs what it drained")
	t.Logf("the process drained %s binds", drained[1])
	assert.NotEqual(t, "0", drained[1], "SIGTERM came in the middle of the binds")
	holder, err := leaseHolder(c, schedulerLease)
	require.NoError(t, err)
	assert.Empty(t, holder, "the Lease was released after the drain")
}
