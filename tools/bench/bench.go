// Package bench runs Phalanx and its baselines side by side on the same
// benchmark cases (the performance targets in docs/benchmarks.md).
//
// Every arm of every case gets a fresh sandbox (tools/sandbox). In the
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
//     are skipped: Coscheduling has none;
//   - kueue-tas (optional): Kueue's own manager (v0.17.0, tools/cmd/phalanx-kueue)
//     with its topology-aware scheduling choosing every pod's node at
//     admission, and upstream kube-scheduler binding the pods there; each
//     gang is an Indexed batch/v1 Job in a Kueue LocalQueue (kueue.go). It
//     runs the preferred-topology stream only.
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
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/phalanx-sched/phalanx/tools/bench/report"
	"github.com/phalanx-sched/phalanx/tools/sandbox"
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
	// ArmKueueTAS runs Kueue's manager with its TAS in front of upstream
	// kube-scheduler (kueue.go).
	ArmKueueTAS Arm = report.ArmKueueTAS
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
// (docs/benchmarks.md, the arms table, has the numbers).
const DefaultUpstreamGates = "GenericWorkload=true,TopologyAwareWorkloadScheduling=true"

// ParseArms parses a comma-separated list of arm names.
func ParseArms(s string) ([]Arm, error) {
	var out []Arm
	for _, name := range strings.Split(s, ",") {
		name = strings.TrimSpace(name)
		switch Arm(name) {
		case ArmPhalanx, ArmPhalanxProcess, ArmUpstream, ArmCeiling, ArmSchedulerPlugins, ArmKueueTAS:
			out = append(out, Arm(name))
		case "":
		default:
			return nil, fmt.Errorf("unknown arm %q: want phalanx, upstream, ceiling, phalanx-proc, scheduler-plugins or kueue-tas", name)
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
	// Kueue is a prebuilt phalanx-kueue for the kueue-tas arm; when empty
	// it is built (go build, cached) from this module into CacheDir.
	Kueue string
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
	// HeapProfileDir, when set, receives heap profiles of a child-process
	// scheduler: <case>-<arm>-<run>-scheduler-heap-peak.pprof, fetched
	// whenever its resident set grew past the largest seen in the window
	// (so the last one written is the nearest to its peak RSS), and
	// ...-heap-end.pprof after the last pod bound, then ...-heap-live.pprof
	// after a forced collection (the heap retained, without the garbage
	// the last collection found still live while it marked). Cheap enough
	// to leave on in measured runs: a profile is fetched only when RSS
	// grows, and the one forced collection adds tens of milliseconds to
	// the scheduler's CPU.
	HeapProfileDir string
	// StarvationWindow, StarvationSeed and StarvationRate, when set,
	// replace the starvation cases' window (DefaultStarvationWindow), seed
	// of the arrival schedule and small jobs per second.
	StarvationWindow time.Duration
	StarvationSeed   int64
	StarvationRate   float64
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
	kueue                      string
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
		schedulerPluginsScheduler: opts.SchedulerPluginsScheduler, schedulerPluginsController: opts.SchedulerPluginsController,
		kueue: opts.Kueue}
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
	// kueue-tas binds with upstream's kube-scheduler.
	if (needs[ArmUpstream] || needs[ArmKueueTAS]) && h.kubeScheduler == "" {
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
	if needs[ArmKueueTAS] && h.kueue == "" {
		if h.kueue, err = build("", sandbox.KueuePackage, filepath.Join(h.opts.CacheDir, "phalanx-kueue")); err != nil {
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
	if arm == ArmKueueTAS {
		if res.Skipped = kueueTASUnsupported(c); res.Skipped != "" {
			h.opts.Logf("%s: skipped: %s", tag, res.Skipped)
			return res
		}
	} else if len(c.PreferredTopology) > 0 && arm != ArmPhalanx && arm != ArmPhalanxProcess {
		res.Skipped = "preferred topology levels are a Phalanx extension this scheduler cannot express (kueue-tas runs them through Kueue's TAS); the RequiredBlock, RequiredRack and Unconstrained twins are the baselines"
		h.opts.Logf("%s: skipped: %s", tag, res.Skipped)
		return res
	}
	if c.Starvation != nil {
		if res.Skipped = starvationSkip(c, arm); res.Skipped != "" {
			h.opts.Logf("%s: skipped: %s", tag, res.Skipped)
			return res
		}
		c = h.withStarvationOptions(c)
		if err := h.runStarvation(ctx, c, arm, &res, tag); err != nil {
			res.Error = err.Error()
			h.opts.Logf("%s: FAILED: %v", tag, err)
			return res
		}
		st := res.Starvation
		h.opts.Logf("%s: big gang start %s; small jobs %d of %d done (%.1f/min), %d started, mean wait %.1fs; utilisation %.0f%%",
			tag, starvationGangStart(st.GangStartSeconds), st.SmallDone, st.SmallCreated, st.SmallDonePerMinute, st.SmallStarted, st.MeanWaitSeconds, 100*st.Utilisation)
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
