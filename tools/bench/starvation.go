package bench

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/phalanx-sched/phalanx/config"
	"github.com/phalanx-sched/phalanx/tools/bench/report"
	"github.com/phalanx-sched/phalanx/tools/sandbox"
)

// Starvation makes a starvation case: a stream of one-node jobs with
// runtimes and one big gang (the case's single gang, in one domain of its
// TopologyKey), over a fixed window. The node agent ends every pod when
// its runtime does. Unlike the other cases the window does not end when
// everything is bound: it measures what a scheduler does with a cluster
// kept busy.
type Starvation struct {
	// Rate is small jobs per second, arriving as a Poisson process from
	// the window's start, drawn from Seed (the same schedule on every arm).
	Rate float64
	Seed int64
	// Small jobs ask for the case's PodCPU (a whole node), run uniform in
	// [MinRuntime, MaxRuntime] and declare activeDeadlineSeconds of their
	// runtime rounded up plus DeadlineSlack: what backfill reads.
	MinRuntime, MaxRuntime, DeadlineSlack time.Duration
	// GangAt is when the gang arrives; GangRuntime how long it runs.
	GangAt, GangRuntime time.Duration
	// Window is how long the stream runs before the run is measured.
	Window time.Duration
	// Reservation is the PhalanxTopology reservation args of Phalanx's
	// arms; nil leaves reservations off.
	Reservation map[string]any
}

// DefaultStarvationWindow keeps a starvation run under a minute and a
// half per arm, sandbox included, so that all four runs (three Phalanx
// variants and upstream) take about five minutes.
const DefaultStarvationWindow = 60 * time.Second

// starvationCases are the reservation off, on without backfill and on with
// backfill variants of one stream: 2 racks × 4 nodes × 4 cpu; one-node
// jobs at 0.85/s (about 106% of the cluster) running 5–15 s; a gang of 4
// that needs a whole rack at 5 s, running 20 s. Baselines run the
// reservation-off variant only.
func starvationCases() []Case {
	base := Starvation{Rate: 0.85, Seed: 1, MinRuntime: 5 * time.Second, MaxRuntime: 15 * time.Second, DeadlineSlack: 2 * time.Second,
		GangAt: 5 * time.Second, GangRuntime: 20 * time.Second, Window: DefaultStarvationWindow}
	variant := func(suffix string, resv map[string]any) Case {
		s := base
		s.Reservation = resv
		return Case{Name: "Starvation/8Nodes_1RackGang_" + suffix, Zones: 1, RacksPerZone: 2, NodesPerRack: 4,
			Gangs: 1, PodsPerGang: 4, TopologyKey: sandbox.RackLabel, PodCPU: nodeCPU, Arrival: report.ArrivalLive, Starvation: &s}
	}
	reservation := func(backfill bool) map[string]any {
		return map[string]any{"afterSeconds": 5, "maxHoldSeconds": 120, "backfill": backfill}
	}
	return []Case{
		variant("ReservationOff", nil),
		variant("ReservationOn_BackfillOff", reservation(false)),
		variant("ReservationOn_BackfillOn", reservation(true)),
	}
}

// starvationSkip says why arm does not run starvation case c ("" when it
// does).
func starvationSkip(c Case, arm Arm) string {
	switch {
	case arm == ArmCeiling:
		return "the bind ceiling binds in creation order; there is no scheduler to starve the gang"
	case arm == ArmSchedulerPlugins:
		return schedulerPluginsUnsupported(c)
	case c.Starvation.Reservation != nil && arm != ArmPhalanx && arm != ArmPhalanxProcess:
		return "reservation is a Phalanx argument; the ReservationOff case is this arm's run"
	}
	return ""
}

// withStarvationOptions applies the harness's overrides of the window,
// seed and rate.
func (h *Harness) withStarvationOptions(c Case) Case {
	s := *c.Starvation
	if h.opts.StarvationWindow > 0 {
		s.Window = h.opts.StarvationWindow
	}
	if h.opts.StarvationSeed != 0 {
		s.Seed = h.opts.StarvationSeed
	}
	if h.opts.StarvationRate > 0 {
		s.Rate = h.opts.StarvationRate
	}
	c.Starvation = &s
	return c
}

// phalanxConfigFor is the Phalanx arms' configuration for c: base with the
// case's reservation args, if any.
func phalanxConfigFor(c Case, base []byte) ([]byte, error) {
	if c.Starvation == nil || c.Starvation.Reservation == nil {
		return base, nil
	}
	return config.WithPluginArg(base, "PhalanxTopology", "reservation", c.Starvation.Reservation)
}

// starvationArrival is one small job: when it is created, from the
// window's start, and how long it runs.
type starvationArrival struct {
	at, runtime time.Duration
}

// arrivals draws the small jobs that arrive within the window.
func (s *Starvation) arrivals() []starvationArrival {
	rng := rand.New(rand.NewPCG(uint64(s.Seed), 0x5eed))
	var out []starvationArrival
	var at time.Duration
	for {
		at += time.Duration(rng.ExpFloat64() / s.Rate * float64(time.Second))
		if at >= s.Window {
			return out
		}
		rt := s.MinRuntime + time.Duration(rng.Float64()*float64(s.MaxRuntime-s.MinRuntime))
		out = append(out, starvationArrival{at: at, runtime: rt.Round(time.Millisecond)})
	}
}

func smallJobName(i int) string { return fmt.Sprintf("job-%03d", i) }

// withRuntime makes the node agent end p after d.
func withRuntime(p *corev1.Pod, d time.Duration) *corev1.Pod {
	if p.Annotations == nil {
		p.Annotations = map[string]string{}
	}
	p.Annotations[sandbox.RuntimeAnnotation] = strconv.FormatFloat(d.Seconds(), 'f', -1, 64)
	return p
}

// runStarvation is one arm's starvation run: a fresh sandbox with the
// node agent, the arm's scheduler started and ready, then the window, in
// which the harness creates the small jobs on their schedule and the gang
// at GangAt; then what every pod did.
func (h *Harness) runStarvation(ctx context.Context, c Case, arm Arm, res *report.Result, tag string) error {
	s := c.Starvation
	runtime.GC()
	setup := time.Now()
	cl, err := h.startBenchCluster(ctx, c, arm, tag)
	if err != nil {
		return err
	}
	defer cl.Stop()
	sc := cl.Cluster
	const ns = benchNamespace
	if err := warmWatchCaches(ctx, sc, ns); err != nil {
		return err
	}
	plan := s.arrivals()
	gangs := c.measuredGangs()
	gang := gangs[0]
	names := append([]string(nil), gang.pods...)
	for i := range plan {
		names = append(names, smallJobName(i))
	}
	watch, err := watchBinds(ctx, cl.Client, ns, names)
	if err != nil {
		return err
	}
	defer watch.stop()

	dir := filepath.Join(h.opts.WorkDir, fmt.Sprintf("%s-%s-%d", strings.ReplaceAll(c.Name, "/", "_"), arm, res.Run))
	apiBefore, err := inProcessMetrics()
	if err != nil {
		return err
	}
	a, err := h.startArm(ctx, sc, ns, c, arm, dir, time.Now(), apiBefore, res, nil)
	if err != nil {
		return err
	}
	stopped := false
	defer func() {
		if !stopped {
			a.stop(res)
		}
	}()
	if err := a.waitReady(ctx, readyTimeout); err != nil {
		return err
	}
	if err := a.markWindow(ctx); err != nil {
		return err
	}
	res.SetupSeconds = time.Since(setup).Seconds()
	h.opts.Logf("%s: sandbox with %d nodes and the scheduler ready in %.1fs; %d small jobs over %v, the gang at %v", tag, c.NodeCount(), res.SetupSeconds, len(plan), s.Window, s.GangAt)

	pods := make(map[string]*report.StarvationPod, len(names))
	create := func(p *corev1.Pod, sp *report.StarvationPod) error {
		sp.Created = time.Now()
		if _, err := cl.Client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create pod %s: %w", p.Name, err)
		}
		pods[p.Name] = sp
		return nil
	}
	requests := c.podRequests()
	cpu := requests.Cpu().AsApproximateFloat64()
	var gangCreated time.Time
	createGang := func() error {
		gangCreated = time.Now()
		if err := createGroup(ctx, cl, ns, c, arm, gang, false); err != nil {
			return err
		}
		for _, name := range gang.pods {
			p := withRuntime(benchPod(c, name, gang.name, arm, ""), s.GangRuntime)
			if err := create(p, &report.StarvationPod{Gang: true, CPU: cpu, Runtime: s.GangRuntime}); err != nil {
				return err
			}
		}
		return nil
	}
	begin := time.Now()
	timer := time.NewTimer(0)
	defer timer.Stop()
	wait := func(at time.Duration) error {
		timer.Reset(time.Until(begin.Add(at)))
		select {
		case <-timer.C:
			return nil
		case <-a.exited():
			return fmt.Errorf("the scheduler exited: %v", a.exitError())
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	gangDone := false
	for i, arr := range plan {
		if !gangDone && arr.at >= s.GangAt {
			if err := wait(s.GangAt); err != nil {
				return err
			}
			if err := createGang(); err != nil {
				return err
			}
			gangDone = true
		}
		if err := wait(arr.at); err != nil {
			return err
		}
		p := withRuntime(benchPod(c, smallJobName(i), "", arm, ""), arr.runtime)
		p.Spec.ActiveDeadlineSeconds = ptr.To(int64(math.Ceil(arr.runtime.Seconds()) + math.Ceil(s.DeadlineSlack.Seconds())))
		if err := create(p, &report.StarvationPod{CPU: cpu, Runtime: arr.runtime}); err != nil {
			return err
		}
	}
	if !gangDone && s.GangAt < s.Window {
		if err := wait(s.GangAt); err != nil {
			return err
		}
		if err := createGang(); err != nil {
			return err
		}
	}
	if err := wait(s.Window); err != nil {
		return err
	}
	end := time.Now()
	binds := watch.snapshot()
	res.Stop = fmt.Sprintf("window %v", s.Window)
	res.LoadAverage = loadAverage()
	a.measure(ctx, res, len(binds))
	stopped = true
	a.stop(res)

	list, err := cl.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list pods: %w", err)
	}
	var running []*corev1.Pod
	for i := range list.Items {
		p := &list.Items[i]
		if sp := pods[p.Name]; sp != nil {
			sp.Done = p.Status.Phase == corev1.PodSucceeded
		}
		if p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
			running = append(running, p)
		}
	}
	measured := make([]report.StarvationPod, 0, len(pods))
	for name, sp := range pods {
		sp.Bound = binds[name]
		measured = append(measured, *sp)
	}
	st := report.ComputeStarvation(measured, begin, end, gangCreated, float64(c.NodeCount())*4)
	res.Starvation = &st
	if st.GangStartSeconds >= 0 {
		res.FirstGroupSeconds = st.GangStartSeconds
	}

	// The placement check: the gang whole and in one rack (finished
	// members included: they ran there), and no node over its capacity
	// among the pods still holding one (a finished pod's room is free).
	nodes, err := cl.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list nodes: %w", err)
	}
	nodePtrs := make([]*corev1.Node, len(nodes.Items))
	for i := range nodes.Items {
		nodePtrs[i] = &nodes.Items[i]
	}
	all := make([]*corev1.Pod, len(list.Items))
	var gangPods []*corev1.Pod
	for i := range list.Items {
		all[i] = &list.Items[i]
		if pods[all[i].Name] != nil && pods[all[i].Name].Gang {
			gangPods = append(gangPods, all[i])
		}
	}
	res.Verdict = report.Check(c.groups(), nodePtrs, gangPods)
	capacity := report.Check(nil, nodePtrs, running)
	res.Verdict.OvercommittedNodes += capacity.OvercommittedNodes
	res.Verdict.UnknownNodes += capacity.UnknownNodes
	res.Verdict.Problems = append(res.Verdict.Problems, capacity.Problems...)
	res.Verdict.Pods, res.Verdict.Bound = measuredBound(gang.pods, all)
	return nil
}

// starvationGangStart words a gang start for the progress log.
func starvationGangStart(secs float64) string {
	if secs < 0 {
		return "never (in the window)"
	}
	return fmt.Sprintf("%.1fs", secs)
}
