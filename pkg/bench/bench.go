// Package bench runs Phalanx and its baselines side by side on the same
// benchmark cases (the performance targets in docs/benchmarks.md).
//
// Every arm of every case gets a fresh sandbox (pkg/sandbox). In the
// precreated arrival mode the nodes, groups and pods are created first,
// then the scheduler under test starts, as upstream's scheduler_perf's
// pre-created workloads do; in the live mode the scheduler starts and is
// ready first, then the harness creates the groups and pods while it runs.
// Preemption cases are always live: low-priority gangs fill the cluster,
// then a high-priority gang arrives. The arms:
//
//   - phalanx: the Phalanx scheduler in this process (sandbox StartScheduler,
//     config/second-scheduler.yaml), pods attached to Phalanx PodGroups by
//     the scheduling.phalanx.dev/pod-group label, or with Options.Dialect
//     native to the upstream arm's scheduling.k8s.io/v1beta1 PodGroups by
//     spec.schedulingGroup;
//   - upstream: kube-scheduler v1.37.2 built from k8s.io/kubernetes and run
//     as a child process (its feature gates are process-global), on native
//     scheduling.k8s.io/v1beta1 PodGroups and spec.schedulingGroup;
//   - ceiling: no scheduler, just workers POSTing pods/binding: what the API
//     server can bind at most;
//   - phalanx-proc (optional): cmd/phalanx-scheduler as a child process, so
//     that its peak memory is measured alone, as upstream's is;
//   - scheduler-plugins (optional): sigs.k8s.io/scheduler-plugins' own
//     kube-scheduler (v0.34.7, Kubernetes v1.34 libraries, Coscheduling
//     profile) and its PodGroup controller, built from hack/scheduler-plugins
//     and run as child processes, on scheduling.x-k8s.io PodGroups and the
//     scheduling.x-k8s.io/pod-group label. Cases with a topology constraint
//     are skipped: Coscheduling has none.
//
// The measured window starts when the scheduler is started (precreated) or
// at the first pod creation (live) and ends when every measured pod is
// bound, no pod has bound for Case.Stall, or Case.Timeout passes. The
// placement is then checked (report.Check), victims of a preemption case
// counted (report.CountVictims) and, for topology-constrained cases, the
// racks left able to host one more gang (report.ComputeFragmentation).
package bench

import (
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/component-base/metrics/legacyregistry"

	v1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
	"github.com/phalanx-sched/phalanx/pkg/bench/report"
	"github.com/phalanx-sched/phalanx/pkg/sandbox"
)

// Arm is a scheduler (or the bind ceiling) under measurement.
type Arm string

// The arms.
const (
	ArmPhalanx        Arm = report.ArmPhalanx
	ArmPhalanxProcess Arm = report.ArmPhalanxProcess
	ArmUpstream       Arm = report.ArmUpstream
	ArmCeiling        Arm = report.ArmCeiling
	// ArmSchedulerPlugins runs sigs.k8s.io/scheduler-plugins' scheduler and
	// PodGroup controller (schedulerplugins.go).
	ArmSchedulerPlugins Arm = report.ArmSchedulerPlugins
)

// Dialects of Options.Dialect.
const (
	DialectPhalanx = "phalanx"
	DialectNative  = "native"
)

// DefaultArms are measured when Options.Arms is empty.
var DefaultArms = []Arm{ArmPhalanx, ArmUpstream, ArmCeiling}

// DefaultUpstreamGates is upstream's best gate set for these cases: its
// gang (GenericWorkload) and topology-aware (TopologyAwareWorkloadScheduling)
// pod-group cycle. CompositePodGroup stays off: the cases use no composite
// groups, and turning it on only slows upstream's pod-group cycle down
// (an earlier measurement on this machine class: 100 → 24 pods/s on gang
// 3 × 1,000).
const DefaultUpstreamGates = "GenericWorkload=true,TopologyAwareWorkloadScheduling=true"

// ParseArms parses a comma-separated list of arm names.
func ParseArms(s string) ([]Arm, error) {
	var out []Arm
	for _, name := range strings.Split(s, ",") {
		name = strings.TrimSpace(name)
		switch Arm(name) {
		case ArmPhalanx, ArmPhalanxProcess, ArmUpstream, ArmCeiling, ArmSchedulerPlugins:
			out = append(out, Arm(name))
		case "":
		default:
			return nil, fmt.Errorf("unknown arm %q: want phalanx, upstream, ceiling, phalanx-proc or scheduler-plugins", name)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no arms in %q", s)
	}
	return out, nil
}

// Options configure a Harness.
type Options struct {
	// Arms to run on each case, in this order; default DefaultArms.
	Arms []Arm
	// Repeat runs every case this many times, interleaving the arms
	// (A B C A B C ...) so that drift on a shared machine hits all arms.
	Repeat int
	// UpstreamGates are kube-scheduler's --feature-gates; default
	// DefaultUpstreamGates. A case may add gates (Case.UpstreamGates).
	UpstreamGates string
	// PhalanxGates are added to the phalanx-proc arm's --feature-gates
	// (which otherwise match the in-process arm's), to measure a gate's
	// effect on Phalanx.
	PhalanxGates string
	// PhalanxConfig replaces the phalanx-proc arm's
	// KubeSchedulerConfiguration (default config.SecondScheduler), to
	// measure a profile or plugin argument.
	PhalanxConfig []byte
	// Arrival is the cases' arrival mode (report.ArrivalPrecreated, the
	// default, or report.ArrivalLive); a case may fix its own.
	Arrival string
	// Dialect is the API the Phalanx arms' gangs are written in:
	// DialectPhalanx (the default: Phalanx PodGroup CRDs and the pod-group
	// label) or DialectNative (scheduling.k8s.io/v1beta1 PodGroups and
	// spec.schedulingGroup, the very objects the upstream arm gets).
	Dialect string
	// KubeScheduler and PhalanxScheduler are prebuilt binaries for the
	// child-process arms. When empty they are built (go build, cached)
	// from this module into CacheDir.
	KubeScheduler    string
	PhalanxScheduler string
	// SchedulerPluginsScheduler and SchedulerPluginsController are prebuilt
	// binaries of the scheduler-plugins arm (`make scheduler-plugins`).
	// When empty they are built (go build, cached) from the module in
	// hack/scheduler-plugins into CacheDir.
	SchedulerPluginsScheduler  string
	SchedulerPluginsController string
	// CacheDir holds built binaries; default <user cache>/phalanx-bench.
	CacheDir string
	// WorkDir holds child-process configs, certificates and logs; default a
	// temporary directory removed by Close.
	WorkDir string
	// BinderWorkers is the bind ceiling's concurrency; default 32.
	BinderWorkers int
	// CPUProfileDir, when set, receives a CPU profile of this process over
	// each measured window (<case>-<arm>-<run>.pprof: API server, etcd and
	// any in-process scheduler) and, for a child-process scheduler, its own
	// profiles in 2 s chunks (<case>-<arm>-<run>-scheduler-NNN.pprof), to
	// see where an arm's time goes. Profiling costs some CPU: do not mix
	// profiled runs into measured tables.
	CPUProfileDir string
	// Logf, when set, receives progress lines.
	Logf func(format string, args ...interface{})
}

// Harness runs cases. Create it with New, release it with Close.
type Harness struct {
	opts                       Options
	kubeScheduler              string
	phalanxScheduler           string
	schedulerPluginsScheduler  string
	schedulerPluginsController string
	ownWorkDir                 bool
}

// New validates opts and builds the scheduler binaries the arms need.
func New(ctx context.Context, opts Options) (*Harness, error) {
	if len(opts.Arms) == 0 {
		opts.Arms = DefaultArms
	}
	if opts.Repeat < 1 {
		opts.Repeat = 1
	}
	if opts.UpstreamGates == "" {
		opts.UpstreamGates = DefaultUpstreamGates
	}
	switch opts.Arrival {
	case "":
		opts.Arrival = report.ArrivalPrecreated
	case report.ArrivalPrecreated, report.ArrivalLive:
	default:
		return nil, fmt.Errorf("unknown arrival mode %q: want %s or %s", opts.Arrival, report.ArrivalPrecreated, report.ArrivalLive)
	}
	switch opts.Dialect {
	case "":
		opts.Dialect = DialectPhalanx
	case DialectPhalanx, DialectNative:
	default:
		return nil, fmt.Errorf("unknown dialect %q: want %s or %s", opts.Dialect, DialectPhalanx, DialectNative)
	}
	if opts.BinderWorkers < 1 {
		opts.BinderWorkers = 32
	}
	if opts.Logf == nil {
		opts.Logf = func(string, ...interface{}) {}
	}
	h := &Harness{opts: opts, kubeScheduler: opts.KubeScheduler, phalanxScheduler: opts.PhalanxScheduler,
		schedulerPluginsScheduler: opts.SchedulerPluginsScheduler, schedulerPluginsController: opts.SchedulerPluginsController}
	if h.opts.WorkDir == "" {
		dir, err := os.MkdirTemp("", "phalanx-bench-")
		if err != nil {
			return nil, err
		}
		h.opts.WorkDir, h.ownWorkDir = dir, true
	}
	if h.opts.CacheDir == "" {
		base, err := os.UserCacheDir()
		if err != nil {
			base = os.TempDir()
		}
		h.opts.CacheDir = filepath.Join(base, "phalanx-bench")
	}
	needs := map[Arm]bool{}
	for _, a := range opts.Arms {
		needs[a] = true
	}
	var moduleDir string
	// build builds pkg of the Go module in the repository's directory sub
	// ("" for this module).
	build := func(sub, pkg, out string) (string, error) {
		if moduleDir == "" {
			dir, err := findModuleDir()
			if err != nil {
				return "", err
			}
			moduleDir = dir
		}
		start := time.Now()
		h.opts.Logf("building %s into %s", filepath.Join(sub, pkg), out)
		if err := buildBinary(ctx, filepath.Join(moduleDir, sub), pkg, out); err != nil {
			return "", err
		}
		h.opts.Logf("built %s in %.1fs", filepath.Base(out), time.Since(start).Seconds())
		return out, nil
	}
	var err error
	if needs[ArmUpstream] && h.kubeScheduler == "" {
		out := filepath.Join(h.opts.CacheDir, "kube-scheduler-"+kubernetesVersion())
		if h.kubeScheduler, err = build("", kubeSchedulerPkg, out); err != nil {
			h.Close()
			return nil, err
		}
	}
	if needs[ArmPhalanxProcess] && h.phalanxScheduler == "" {
		if h.phalanxScheduler, err = build("", phalanxSchedulerPkg, filepath.Join(h.opts.CacheDir, "phalanx-scheduler")); err != nil {
			h.Close()
			return nil, err
		}
	}
	// scheduler-plugins' binaries come from their own module (Kubernetes
	// v1.34 libraries), cached per release as upstream's kube-scheduler is.
	if needs[ArmSchedulerPlugins] && h.schedulerPluginsScheduler == "" {
		out := filepath.Join(h.opts.CacheDir, "scheduler-plugins-scheduler-"+SchedulerPluginsVersion)
		if h.schedulerPluginsScheduler, err = build(schedulerPluginsModule, schedulerPluginsSchedulerPkg, out); err != nil {
			h.Close()
			return nil, err
		}
	}
	if needs[ArmSchedulerPlugins] && h.schedulerPluginsController == "" {
		out := filepath.Join(h.opts.CacheDir, "scheduler-plugins-controller-"+SchedulerPluginsVersion)
		if h.schedulerPluginsController, err = build(schedulerPluginsModule, schedulerPluginsControllerPkg, out); err != nil {
			h.Close()
			return nil, err
		}
	}
	return h, nil
}

// Close removes the harness's temporary work directory.
func (h *Harness) Close() {
	if h.ownWorkDir {
		os.RemoveAll(h.opts.WorkDir)
	}
}

// Run runs every case under every arm, Repeat times, interleaved.
func (h *Harness) Run(ctx context.Context, cases []Case) []report.Result {
	var out []report.Result
	for run := 1; run <= h.opts.Repeat; run++ {
		for _, c := range cases {
			for _, arm := range h.opts.Arms {
				if ctx.Err() != nil {
					return out
				}
				out = append(out, h.RunCase(ctx, c, arm, run))
			}
		}
	}
	return out
}

// RunCase runs one case under one arm on a fresh sandbox. A failure to run
// at all is reported in Result.Error.
func (h *Harness) RunCase(ctx context.Context, c Case, arm Arm, run int) report.Result {
	res := report.Result{Case: c.Name, Arm: string(arm), Run: run, Arrival: c.arrival(h.opts.Arrival),
		Nodes: c.NodeCount(), Pods: c.PodCount(), Groups: c.GangCount()}
	c.dialect = h.opts.Dialect
	if arm == ArmPhalanx || arm == ArmPhalanxProcess {
		res.Dialect = c.dialect
	}
	tag := fmt.Sprintf("%s [%s, %s #%d]", c.Name, arm, res.Arrival, run)
	if res.Dialect == DialectNative {
		tag = fmt.Sprintf("%s [%s on native objects, %s #%d]", c.Name, arm, res.Arrival, run)
	}
	if c.Preemption != nil && arm == ArmCeiling {
		res.Skipped = "the bind ceiling does not preempt"
		h.opts.Logf("%s: skipped: %s", tag, res.Skipped)
		return res
	}
	if len(c.PreferredTopology) > 0 && arm != ArmPhalanx && arm != ArmPhalanxProcess {
		res.Skipped = "preferred topology levels are a Phalanx extension; the RequiredBlock, RequiredRack and Unconstrained twins are the baselines"
		h.opts.Logf("%s: skipped: %s", tag, res.Skipped)
		return res
	}
	if arm == ArmSchedulerPlugins {
		if why := schedulerPluginsUnsupported(c); why != "" {
			res.Skipped = why
			h.opts.Logf("%s: skipped: %s", tag, res.Skipped)
			return res
		}
	}
	if err := h.runCase(ctx, c, arm, &res, tag); err != nil {
		res.Error = err.Error()
		h.opts.Logf("%s: FAILED: %v", tag, err)
		return res
	}
	v := res.Verdict
	placement := "placement ok"
	if !v.OK() {
		placement = fmt.Sprintf("PLACEMENT VIOLATED: %s", strings.Join(v.Problems, "; "))
	}
	extra := ""
	if p := res.Preemption; p != nil {
		extra += fmt.Sprintf("; victims: %d pods, %d of %d low gangs evicted whole, %d partial gangs left", p.VictimPods, p.VictimGangs, p.LowGangs, p.PartialGangs)
	}
	if f := res.Fragmentation; f != nil {
		extra += fmt.Sprintf("; %d of %d racks can host a %d-pod gang, %d fragmented", f.CanHost, f.Domains, f.GangSize, f.Fragmented)
	}
	h.opts.Logf("%s: %d/%d bound (%s) in %.2fs, %.1f pods/s; %s%s", tag, v.Bound, v.Pods, res.Stop, res.LastBindSeconds, res.PodsPerSecond, placement, extra)
	return res
}

func (h *Harness) runCase(ctx context.Context, c Case, arm Arm, res *report.Result, tag string) error {
	// Start from a collected heap, so that one arm's peak is not the
	// garbage of the sandbox before it.
	runtime.GC()
	debug.FreeOSMemory()
	live := res.Arrival == report.ArrivalLive

	setup := time.Now()
	sc, err := h.startSandbox(ctx, c, tag)
	if err != nil {
		return err
	}
	defer sc.Stop()
	cl := &benchCluster{Cluster: sc}
	const ns = "bench"
	if _, err := cl.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create namespace: %w", err)
	}
	if arm == ArmSchedulerPlugins {
		if cl.schedulerPlugins, err = installSchedulerPluginsCRD(ctx, sc); err != nil {
			return err
		}
		if err := warmSchedulerPluginsCache(ctx, cl.schedulerPlugins, ns); err != nil {
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
	}
	if err := warmWatchCaches(ctx, sc, ns); err != nil {
		return err
	}
	names, _ := c.podNames()
	watch, err := watchBinds(ctx, cl.Client, ns, names)
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
	for i := range pods.Items {
		podPtrs[i] = &pods.Items[i]
	}
	nodePtrs := make([]*corev1.Node, len(nodes.Items))
	for i := range nodes.Items {
		nodePtrs[i] = &nodes.Items[i]
	}
	res.Verdict = report.Check(c.groups(), nodePtrs, podPtrs)
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

func (h *Harness) startSandbox(ctx context.Context, c Case, tag string) (*sandbox.Cluster, error) {
	topo := c.topology()
	var err error
	for try := 1; try <= sandboxStartTries; try++ {
		var cl *sandbox.Cluster
		// Preemption needs victims to go away: the node agent finishes
		// their graceful deletion as a kubelet would.
		if cl, err = sandbox.Start(ctx, sandbox.Options{Topology: &topo, NodeAgent: c.Preemption != nil}); err == nil {
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
	// The first write of a just-installed CRD waits about 2 s as well
	// (measured: the first PodGroup create took 2.0 s, the next ones 5 ms),
	// which a live run would otherwise count: write one PodGroup (dry run)
	// of each API first.
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

// armRunner is a started arm.
type armRunner interface {
	// exited is closed when the scheduler ends on its own; nil (never)
	// for in-process arms.
	exited() <-chan struct{}
	exitError() error
	// waitReady returns once the scheduler has synced its informers
	// (immediately for in-process arms, whose start returns synced).
	waitReady(ctx context.Context, timeout time.Duration) error
	// markWindow takes the scheduler's metrics at the start of a live
	// window, so that measure counts the window only.
	markWindow(ctx context.Context) error
	// measure fills attempts and memory; it runs before stop. bound is
	// how many pods the watch saw bound: a scheduler counts a pod in its
	// metrics only once its bind call has returned, a moment after the
	// watch saw the pod bound, so measure waits (briefly) for the counts
	// to catch up.
	measure(ctx context.Context, res *report.Result, bound int)
	stop(res *report.Result)
}

// startArm starts the arm's scheduler (or binder) against cl. before is
// this process's metrics just before start: an in-process scheduler's
// counters are cumulative over the arms run in one process.
func (h *Harness) startArm(ctx context.Context, cl *sandbox.Cluster, ns string, c Case, arm Arm, dir string, start time.Time, before report.Samples, res *report.Result, created <-chan int) (armRunner, error) {
	switch arm {
	case ArmPhalanx:
		res.Gates = gateString(sandbox.UpstreamWorkloadGates)
		if _, err := cl.StartScheduler(ctx); err != nil {
			return nil, fmt.Errorf("start in-process Phalanx scheduler: %w", err)
		}
		res.ReadySeconds = time.Since(start).Seconds()
		return &inProcessArm{cl: cl, before: before}, nil
	case ArmUpstream, ArmPhalanxProcess:
		binary, base, profile, gates := h.kubeScheduler, []byte(nil), upstreamSchedulerName, h.opts.UpstreamGates
		if c.UpstreamGates != "" {
			gates += "," + c.UpstreamGates
		}
		if arm == ArmPhalanxProcess {
			// The same gates as the in-process arm sees.
			binary, base, profile, gates = h.phalanxScheduler, phalanxConfig(), phalanxSchedulerName, gateString(sandbox.UpstreamWorkloadGates)
			if h.opts.PhalanxConfig != nil {
				base = h.opts.PhalanxConfig
			}
			if h.opts.PhalanxGates != "" {
				gates += "," + h.opts.PhalanxGates
			}
		}
		return h.startChildArm(ctx, cl, binary, base, profile, gates, dir, res)
	case ArmSchedulerPlugins:
		// A v1.34 scheduler knows none of the v1.37 gates the other arms
		// set: it runs with its defaults.
		a, err := h.startChildArm(ctx, cl, h.schedulerPluginsScheduler, schedulerPluginsConfig(), schedulerPluginsSchedulerName, "", dir, res)
		if err != nil {
			return nil, err
		}
		controller, err := startChildProcess(h.schedulerPluginsController, []string{"--kubeconfig=" + cl.KubeconfigPath}, filepath.Join(dir, "controller.log"))
		if err != nil {
			a.stop(res)
			return nil, err
		}
		return newSchedulerPluginsArm(a, controller), nil
	case ArmCeiling:
		return &binderArm{b: startBinder(ctx, cl.Client, ns, c, h.opts.BinderWorkers, created)}, nil
	default:
		return nil, fmt.Errorf("unknown arm %q", arm)
	}
}

// startChildArm starts a scheduler binary as a child process with base
// (nil: upstream's default profile) pointed at cl, and, with
// CPUProfileDir, fetches its CPU profiles.
func (h *Harness) startChildArm(ctx context.Context, cl *sandbox.Cluster, binary string, base []byte, profile, gates, dir string, res *report.Result) (*childArm, error) {
	res.Gates = gates
	cfg, err := schedulerConfig(base, cl.KubeconfigPath)
	if err != nil {
		return nil, err
	}
	res.LogPath = filepath.Join(dir, "scheduler.log")
	child, err := startChild(binary, cfg, gates, dir, res.LogPath)
	if err != nil {
		return nil, err
	}
	a := &childArm{child: child, profile: profile, stopProfiles: func() {}}
	if h.opts.CPUProfileDir != "" {
		stop, done := make(chan struct{}), make(chan struct{})
		go func() {
			defer close(done)
			child.profile(ctx, stop, filepath.Join(h.opts.CPUProfileDir, filepath.Base(dir)+"-scheduler"))
		}()
		a.stopProfiles = func() {
			close(stop)
			<-done
		}
	}
	return a, nil
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

// gateString renders gates as a sorted --feature-gates value.
func gateString(gates map[string]bool) string {
	parts := make([]string, 0, len(gates))
	for k, v := range gates {
		parts = append(parts, fmt.Sprintf("%s=%t", k, v))
	}
	sort.Strings(parts)
	return strings.Join(parts, ",")
}

// inProcessMetrics renders this process's legacy registry, where an
// in-process kube-scheduler registers its metrics.
func inProcessMetrics() (report.Samples, error) {
	rec := httptest.NewRecorder()
	legacyregistry.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	s, err := report.ParseMetrics(rec.Body.String())
	if err != nil {
		return nil, fmt.Errorf("read in-process scheduler metrics: %w", err)
	}
	return s, nil
}

type inProcessArm struct {
	cl     *sandbox.Cluster
	before report.Samples
}

func (a *inProcessArm) exited() <-chan struct{}                        { return nil }
func (a *inProcessArm) exitError() error                               { return nil }
func (a *inProcessArm) waitReady(context.Context, time.Duration) error { return nil }

func (a *inProcessArm) markWindow(context.Context) error {
	before, err := inProcessMetrics()
	if err != nil {
		return err
	}
	a.before = before
	return nil
}

func (a *inProcessArm) measure(ctx context.Context, res *report.Result, bound int) {
	res.PeakRSSBytes, res.MemoryScope = peakRSS("self"), report.ScopeHarness
	res.Scheduler = settledMetrics(ctx, bound, func() (*report.SchedulerMetrics, error) {
		after, err := inProcessMetrics()
		if err != nil {
			return nil, err
		}
		return report.MetricsBetween(a.before, after, phalanxSchedulerName, "in-process scheduler metrics"), nil
	})
}

// metricsSettle bounds how long measure waits for a scheduler's metrics
// to count every pod the watch saw bound.
const metricsSettle = 5 * time.Second

// settledMetrics scrapes until the scheduled count reaches bound or
// metricsSettle passes, and returns the last scrape (nil if none worked).
func settledMetrics(ctx context.Context, bound int, scrape func() (*report.SchedulerMetrics, error)) *report.SchedulerMetrics {
	deadline := time.Now().Add(metricsSettle)
	var last *report.SchedulerMetrics
	for {
		if a, err := scrape(); err == nil {
			last = a
			if a.Scheduled >= float64(bound) {
				return a
			}
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return last
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (a *inProcessArm) stop(*report.Result) { a.cl.StopScheduler() }

type childArm struct {
	child        *childScheduler
	profile      string
	stopProfiles func()
	// before is the child's metrics at a live window's start; nil for
	// precreated runs (the child started with the window).
	before report.Samples
}

func (a *childArm) exited() <-chan struct{} { return a.child.exited }
func (a *childArm) exitError() error        { return a.child.exitError() }

func (a *childArm) waitReady(ctx context.Context, timeout time.Duration) error {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for a.child.ready.Load() == 0 {
		select {
		case <-a.child.exited:
			return a.child.exitError()
		case <-deadline.C:
			return fmt.Errorf("scheduler not ready (/readyz) after %v; log: %s", timeout, a.child.logPath)
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
	return nil
}

func (a *childArm) markWindow(ctx context.Context) error {
	samples, err := a.child.metrics(ctx)
	if err != nil {
		return fmt.Errorf("scheduler /metrics at the window's start: %w", err)
	}
	a.before = samples
	return nil
}

func (a *childArm) measure(ctx context.Context, res *report.Result, bound int) {
	res.PeakRSSBytes, res.MemoryScope = a.child.peakRSS(), report.ScopeScheduler
	res.Scheduler = settledMetrics(ctx, bound, func() (*report.SchedulerMetrics, error) {
		samples, err := a.child.metrics(ctx)
		if err != nil {
			return nil, err
		}
		return report.MetricsBetween(a.before, samples, a.profile, "scheduler /metrics"), nil
	})
	res.ReadySeconds = time.Duration(a.child.ready.Load()).Seconds()
}

func (a *childArm) stop(res *report.Result) {
	a.stopProfiles()
	res.SchedulerCPUSeconds = a.child.stop().Seconds()
}

type binderArm struct{ b *binder }

func (a *binderArm) exited() <-chan struct{}                        { return nil }
func (a *binderArm) exitError() error                               { return nil }
func (a *binderArm) waitReady(context.Context, time.Duration) error { return nil }
func (a *binderArm) markWindow(context.Context) error               { return nil }

func (a *binderArm) measure(_ context.Context, res *report.Result, _ int) {
	res.PeakRSSBytes, res.MemoryScope = peakRSS("self"), report.ScopeHarness
	// Let the last bind calls return (the watch may see a pod bound first).
	select {
	case <-a.b.done:
	case <-time.After(metricsSettle):
	}
	res.Scheduler = a.b.metrics()
}

func (a *binderArm) stop(*report.Result) { a.b.stop() }
