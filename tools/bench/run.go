package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
	"github.com/phalanx-sched/phalanx/tools/bench/report"
	"github.com/phalanx-sched/phalanx/tools/sandbox"
)

// runCase is one measured run, in its phases: a fresh sandbox, the
// workload (precreated) or the filler (live preemption), the arm, the
// measured window, then the placement check on what the API server holds.
func (h *Harness) runCase(ctx context.Context, c Case, arm Arm, res *report.Result, tag string) error {
	// Start from a collected heap, so that one arm's peak is not the
	// garbage of the sandbox before it.
	runtime.GC()
	debug.FreeOSMemory()
	live := res.Arrival == report.ArrivalLive

	setup := time.Now()
	cl, err := h.startBenchCluster(ctx, c, arm, tag)
	if err != nil {
		return err
	}
	defer cl.Stop()
	sc := cl.Cluster
	const ns = benchNamespace
	if arm == ArmSchedulerPlugins {
		if cl.schedulerPlugins, err = installSchedulerPluginsCRD(ctx, sc); err != nil {
			return err
		}
		if err := warmSchedulerPluginsCache(ctx, cl.schedulerPlugins, ns); err != nil {
			return err
		}
	}
	if arm == ArmKueueTAS {
		if err := setUpKueue(ctx, sc.KueueClient(), c, ns); err != nil {
			return err
		}
	}
	if c.Preemption != nil {
		if err := createPriorityClasses(ctx, sc); err != nil {
			return err
		}
	}
	if !live {
		if err := createWorkload(ctx, cl, ns, c, arm); err != nil {
			return err
		}
		if c.dra() {
			if err := waitForClaims(ctx, cl.Client, ns, c.PodCount()); err != nil {
				return err
			}
		}
		if arm == ArmKueueTAS {
			if err := waitForKueueWorkloads(ctx, sc.KueueClient(), ns, c.GangCount()); err != nil {
				return err
			}
		}
	}
	if err := warmWatchCaches(ctx, sc, ns); err != nil {
		return err
	}
	names, _ := c.podNames()
	watch, err := watchBindsAs(ctx, cl.Client, ns, names, memberName(arm))
	if err != nil {
		return err
	}
	defer watch.stop()
	if live {
		h.opts.Logf("%s: sandbox with %d nodes ready in %.1fs; starting the scheduler, then creating %d gangs, %d pods", tag, c.NodeCount(), time.Since(setup).Seconds(), c.GangCount(), c.PodCount())
	} else {
		res.SetupSeconds = time.Since(setup).Seconds()
		h.opts.Logf("%s: sandbox with %d nodes, %d gangs, %d pods ready in %.1fs; starting the scheduler", tag, c.NodeCount(), c.GangCount(), c.PodCount(), res.SetupSeconds)
	}

	runName := fmt.Sprintf("%s-%s-%s-%d", strings.ReplaceAll(c.Name, "/", "_"), arm, res.Arrival, res.Run)
	dir := filepath.Join(h.opts.WorkDir, runName)
	stopProfile := func() {}
	if h.opts.CPUProfileDir != "" {
		if stopProfile, err = startCPUProfile(filepath.Join(h.opts.CPUProfileDir, runName+".pprof")); err != nil {
			return err
		}
	}
	defer func() { stopProfile() }()
	apiBefore, err := inProcessMetrics()
	if err != nil {
		return err
	}
	resetPeakRSS()
	cpu0 := processCPU()
	start := time.Now()
	// created feeds a live ceiling binder the pods as they are created.
	var created chan int
	if live && arm == ArmCeiling {
		created = make(chan int, c.PodCount())
	}
	a, err := h.startArm(ctx, sc, ns, c, arm, dir, start, apiBefore, res, created)
	if err != nil {
		return err
	}
	stopped := false
	defer func() {
		if !stopped {
			a.stop(res)
		}
	}()

	var createFailed chan error
	var createDone chan struct{}
	var createEnd time.Time
	if live {
		if err := a.waitReady(ctx, readyTimeout); err != nil {
			return err
		}
		if c.Preemption != nil {
			if err := h.fill(ctx, cl, ns, c, arm, tag); err != nil {
				return err
			}
		}
		res.SetupSeconds = time.Since(setup).Seconds()
		if err := a.markWindow(ctx); err != nil {
			return err
		}
		if apiBefore, err = inProcessMetrics(); err != nil {
			return err
		}
		cpu0 = processCPU()
		createFailed, createDone = make(chan error, 1), make(chan struct{})
		specs := c.measuredGangs()
		start = time.Now()
		go func() {
			defer close(createDone)
			err := createLive(ctx, cl, ns, c, arm, specs, false, func(i int) {
				if created != nil {
					created <- i
				}
			})
			createEnd = time.Now()
			if created != nil {
				close(created)
			}
			if err != nil {
				createFailed <- err
			}
		}()
	}
	res.Stop, err = waitForBinds(ctx, watch, a, start, c, createFailed)
	if createDone != nil {
		<-createDone
		res.CreateSeconds = createEnd.Sub(start).Seconds()
	}
	stopProfile()
	stopProfile = func() {}
	res.HarnessCPUSeconds = (processCPU() - cpu0).Seconds()
	res.HarnessPeakRSSBytes = peakRSS("self")
	res.LoadAverage = loadAverage()
	if apiAfter, err := inProcessMetrics(); err == nil {
		res.APIRequests = report.APIRequestsBetween(apiBefore, apiAfter)
	}
	// Measure before stopping: the child's /metrics and VmHWM go with it.
	a.measure(ctx, res, len(watch.snapshot()))
	stopped = true
	a.stop(res)
	if err != nil {
		return err
	}

	report.Timing{Start: start, Bound: watch.snapshot()}.Fill(res, c.groups())
	res.FailedSchedulingEvents = failedSchedulingEvents(ctx, sc, ns)
	pods, err := cl.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list pods for the placement check: %w", err)
	}
	nodes, err := cl.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list nodes for the placement check: %w", err)
	}
	podPtrs := make([]*corev1.Pod, len(pods.Items))
	nameOf := memberName(arm)
	for i := range pods.Items {
		// The checks below know the members by the case's names.
		pods.Items[i].Name = nameOf(&pods.Items[i])
		podPtrs[i] = &pods.Items[i]
	}
	nodePtrs := make([]*corev1.Node, len(nodes.Items))
	for i := range nodes.Items {
		nodePtrs[i] = &nodes.Items[i]
	}
	res.Verdict = report.Check(c.groups(), nodePtrs, podPtrs)
	if c.dra() {
		if err := checkDevices(ctx, cl.Client, ns, podPtrs, &res.Verdict); err != nil {
			return err
		}
	}
	// Pods and Bound count the measured pods only (not a preemption
	// case's filler); capacity was checked over every pod.
	res.Verdict.Pods, res.Verdict.Bound = measuredBound(names, podPtrs)
	if c.Preemption != nil {
		p := report.CountVictims(c.lowGroups(), podPtrs)
		res.Preemption = &p
	}
	if key := c.fragmentationKey(); key != "" {
		f := report.ComputeFragmentation(nodePtrs, podPtrs, key, c.nextGang(), c.podRequests())
		res.Fragmentation = &f
	}
	if c.SpreadKey != "" {
		s := report.ComputeSpread(c.groups(), nodePtrs, podPtrs, c.SpreadKey)
		res.Spread = &s
	}
	if len(c.RingKeys) > 0 {
		r := report.ComputeRing(c.groups(), nodePtrs, podPtrs, c.RingKeys)
		res.Ring = &r
	}
	return nil
}

// readyTimeout bounds how long a live run waits for the scheduler to be
// ready before it creates pods.
const readyTimeout = 3 * time.Minute

// measuredBound counts the named pods that exist and those bound.
func measuredBound(names []string, pods []*corev1.Pod) (exist, bound int) {
	want := make(map[string]bool, len(names))
	for _, n := range names {
		want[n] = true
	}
	for _, p := range pods {
		if !want[p.Name] {
			continue
		}
		exist++
		if p.Spec.NodeName != "" {
			bound++
		}
	}
	if exist < len(names) {
		// A pod never created (a live run cut short) is still a pod of the case.
		exist = len(names)
	}
	return exist, bound
}

// fill runs a preemption case's filler: it creates the low-priority gangs
// with the scheduler running and waits until every one of their pods is
// bound, before the measured high-priority gangs arrive.
func (h *Harness) fill(ctx context.Context, cl *benchCluster, ns string, c Case, arm Arm, tag string) error {
	specs := c.fillerGangs()
	var names []string
	for _, sp := range specs {
		names = append(names, sp.pods...)
	}
	start := time.Now()
	w, err := watchBinds(ctx, cl.Client, ns, names)
	if err != nil {
		return err
	}
	defer w.stop()
	if err := createLive(ctx, cl, ns, c, arm, specs, true, nil); err != nil {
		return fmt.Errorf("create the low-priority filler: %w", err)
	}
	deadline := time.NewTimer(c.Timeout)
	defer deadline.Stop()
	select {
	case <-w.allBound:
	case <-deadline.C:
		return fmt.Errorf("the low-priority filler did not bind: %d of %d pods bound after %v", len(w.snapshot()), len(names), c.Timeout)
	case <-ctx.Done():
		return ctx.Err()
	}
	h.opts.Logf("%s: %d low-priority gangs (%d pods) bound in %.1fs; creating the high-priority gang", tag, len(specs), len(names), time.Since(start).Seconds())
	return nil
}

// sandboxStartTries bounds how often a sandbox that failed to start (for
// example a loopback port taken between being chosen and bound) is tried
// again. Nothing has been measured yet, so a retry changes no result.
const sandboxStartTries = 3

// benchNamespace holds every object a run creates.
const benchNamespace = "bench"

// startBenchCluster starts the case's sandbox with benchNamespace created
// in it. The caller stops the cluster.
func (h *Harness) startBenchCluster(ctx context.Context, c Case, arm Arm, tag string) (*benchCluster, error) {
	sc, err := h.startSandbox(ctx, c, arm, tag)
	if err != nil {
		return nil, err
	}
	if _, err := sc.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: benchNamespace}}, metav1.CreateOptions{}); err != nil {
		sc.Stop()
		return nil, fmt.Errorf("create namespace: %w", err)
	}
	cl := &benchCluster{Cluster: sc, stopDevices: func() {}}
	if c.dra() {
		start := time.Now()
		if cl.stopDevices, err = setUpDRA(ctx, sc, benchNamespace, c); err != nil {
			sc.Stop()
			return nil, err
		}
		h.opts.Logf("%s: %d GPUs on each of %d nodes published as ResourceSlices in %.1fs", tag, c.GPUs.PerNode, c.NodeCount(), time.Since(start).Seconds())
	}
	return cl, nil
}

func (h *Harness) startSandbox(ctx context.Context, c Case, arm Arm, tag string) (*sandbox.Cluster, error) {
	topo := c.topology()
	// Preemption needs victims to go away: the node agent finishes
	// their graceful deletion as a kubelet would.
	// Starvation runs need pods to end when their runtime does.
	// A DRA case needs pods' claims made from their template.
	opts := sandbox.Options{Topology: &topo, NodeAgent: c.Preemption != nil || c.Starvation != nil, ClaimController: c.dra()}
	if arm == ArmKueueTAS {
		// Kueue's manager, and the Job controller that makes the pods of
		// the Jobs it admits.
		opts.Controllers = true
		opts.Kueue = &sandbox.Kueue{Binary: h.kueue, TAS: true}
	}
	var err error
	for try := 1; try <= sandboxStartTries; try++ {
		var cl *sandbox.Cluster
		if cl, err = sandbox.Start(ctx, opts); err == nil {
			return cl, nil
		}
		if ctx.Err() != nil {
			break
		}
		h.opts.Logf("%s: sandbox start %d of %d failed: %v", tag, try, sandboxStartTries, err)
	}
	return nil, fmt.Errorf("start sandbox: %w", err)
}

// warmWatchCaches makes the API server initialise its watch caches for the
// group resources before the measured window. A fresh API server builds
// the cache of a just-installed CRD on first use and answers that first
// request "429, retry after 1s"; on a long-running cluster the caches are
// warm, so that second belongs to the sandbox, not to the scheduler.
// A LIST at resourceVersion 0 is served from the watch cache, and client-go
// retries the 429 itself.
func warmWatchCaches(ctx context.Context, cl *sandbox.Cluster, ns string) error {
	rv0 := metav1.ListOptions{ResourceVersion: "0", Limit: 1}
	if _, err := cl.Phalanx.SchedulingV1alpha1().PodGroups("").List(ctx, rv0); err != nil {
		return fmt.Errorf("warm the PodGroup watch cache: %w", err)
	}
	if _, err := cl.Phalanx.SchedulingV1alpha1().CompositePodGroups("").List(ctx, rv0); err != nil {
		return fmt.Errorf("warm the CompositePodGroup watch cache: %w", err)
	}
	if _, err := cl.Phalanx.SchedulingV1alpha1().Workloads("").List(ctx, rv0); err != nil {
		return fmt.Errorf("warm the Workload watch cache: %w", err)
	}
	// The first write of a just-installed CRD waits too, about as long
	// (docs/benchmarks.md, "What is measured"), which a live run would
	// otherwise count: write one PodGroup (dry run) of each API first.
	dryRun := metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}
	warm := &v1alpha1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Name: "warm-up", Namespace: ns},
		Spec:       v1alpha1.PodGroupSpec{SchedulingPolicy: v1alpha1.PodGroupSchedulingPolicy{Gang: &v1alpha1.GangSchedulingPolicy{MinCount: 1}}},
	}
	if _, err := cl.Phalanx.SchedulingV1alpha1().PodGroups(ns).Create(ctx, warm, dryRun); err != nil {
		return fmt.Errorf("warm the PodGroup write path: %w", err)
	}
	up := &schedulingv1beta1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Name: "warm-up", Namespace: ns},
		Spec:       schedulingv1beta1.PodGroupSpec{SchedulingPolicy: schedulingv1beta1.PodGroupSchedulingPolicy{Gang: &schedulingv1beta1.GangSchedulingPolicy{MinCount: 1}}},
	}
	if _, err := cl.Client.SchedulingV1beta1().PodGroups(ns).Create(ctx, up, dryRun); err != nil {
		return fmt.Errorf("warm the scheduling.k8s.io PodGroup write path: %w", err)
	}
	return nil
}

// waitForBinds ends the measured window: every pod bound, no bind for
// c.Stall, c.Timeout passed, the scheduler process died, or (live) the
// harness failed to create a pod.
func waitForBinds(ctx context.Context, w *bindWatch, a armRunner, start time.Time, c Case, createFailed <-chan error) (string, error) {
	deadline := time.NewTimer(c.Timeout)
	defer deadline.Stop()
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-w.allBound:
			return "all bound", nil
		case <-a.exited():
			return "scheduler exited", a.exitError()
		case err := <-createFailed:
			return "creation failed", err
		case <-deadline.C:
			return fmt.Sprintf("deadline %v", c.Timeout), nil
		case <-ctx.Done():
			return "cancelled", ctx.Err()
		case <-tick.C:
			last := w.lastBind()
			if last.Before(start) {
				last = start
			}
			if time.Since(last) > c.Stall {
				return fmt.Sprintf("no bind for %v", c.Stall), nil
			}
		}
	}
}

// failedSchedulingEvents sums the counts of FailedScheduling events in ns.
func failedSchedulingEvents(ctx context.Context, cl *sandbox.Cluster, ns string) int {
	evs, err := cl.Client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "reason=FailedScheduling"})
	if err != nil {
		return 0
	}
	total := 0
	for _, e := range evs.Items {
		n := int(e.Count)
		if e.Series != nil && int(e.Series.Count) > n {
			n = int(e.Series.Count)
		}
		if n < 1 {
			n = 1
		}
		total += n
	}
	return total
}

// startCPUProfile profiles this process into path until the returned
// function is called.
func startCPUProfile(path string) (func(), error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, err
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("start CPU profile: %w", err)
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}, nil
}
