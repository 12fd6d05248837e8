package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"sigs.k8s.io/yaml"

	"github.com/phalanx-sched/phalanx/config"
	"github.com/phalanx-sched/phalanx/tools/bench/report"
	"github.com/phalanx-sched/phalanx/tools/bench/schedperf"
	"github.com/phalanx-sched/phalanx/tools/sandbox"
)

// This file replays upstream's own scheduler_perf workloads (read from the
// k8s.io/kubernetes module at run time by tools/bench/schedperf) as
// upstream's runner does: the scheduler starts first, then each operation
// of the workload runs in order (nodes, namespaces, PodGroups, pods, each
// pod-creating operation waiting until its pods are scheduled), and the
// operations marked collectMetrics are measured with upstream's metrics.
// The objects are upstream's own, unchanged: scheduling.k8s.io/v1beta1
// PodGroups and pods naming them in spec.schedulingGroup, with no
// schedulerName, so the Phalanx arms serve default-scheduler with Phalanx's
// profile and every arm consumes the very same objects.

// SchedulerPerfDir is scheduler_perf's directory in the k8s.io/kubernetes
// module this repository builds against: where `go list` finds the module
// from this repository's go.mod, else in the module cache at the version
// this binary links.
func SchedulerPerfDir(ctx context.Context) (string, error) {
	if moduleDir, err := findModuleDir(); err == nil {
		cmd := exec.CommandContext(ctx, "go", "list", "-m", "-f", "{{.Dir}}", "k8s.io/kubernetes")
		cmd.Dir = moduleDir
		if out, err := cmd.Output(); err == nil {
			if dir := strings.TrimSpace(string(out)); dir != "" {
				return checkPerfDir(filepath.Join(dir, schedperf.Dir))
			}
		}
	}
	out, err := exec.CommandContext(ctx, "go", "env", "GOMODCACHE").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMODCACHE: %w", err)
	}
	cacheDir := strings.TrimSpace(string(out))
	return checkPerfDir(filepath.Join(cacheDir, "k8s.io", "kubernetes@"+kubernetesVersion(), schedperf.Dir))
}

func checkPerfDir(dir string) (string, error) {
	if _, err := os.Stat(filepath.Join(dir, schedperf.Acceptance[0], schedperf.ConfigFile)); err != nil {
		return "", fmt.Errorf("scheduler_perf workloads not found in %s (is the k8s.io/kubernetes module downloaded? `go mod download k8s.io/kubernetes`): %w", dir, err)
	}
	return dir, nil
}

// PerfTimeout and PerfStall bound each wait of a replay: a pod-creating
// operation or barrier gives up after PerfTimeout (upstream's runner allows
// 10 minutes, 20 for its topology-aware workloads), or earlier when no pod
// has been scheduled or deleted (a preemption's victims are progress too)
// for PerfStall. Upstream's runner has no stall limit; this one is long
// enough for upstream's own pod-group cycle, one attempt of which at a
// 1,000-pod topology-aware gang on 5,000 nodes can take minutes before
// anything binds (docs/benchmarks.md, "Upstream's own workloads").
const (
	PerfTimeout = 20 * time.Minute
	PerfStall   = 10 * time.Minute
)

// RunPerf runs every selected workload under every arm, Repeat times,
// interleaving the arms. The bind ceiling does not apply (its rows say so).
func (h *Harness) RunPerf(ctx context.Context, selected []schedperf.Selected) []report.PerfResult {
	var out []report.PerfResult
	for run := 1; run <= h.opts.Repeat; run++ {
		for _, s := range selected {
			e, err := s.Expand()
			for _, arm := range h.opts.Arms {
				if ctx.Err() != nil {
					return out
				}
				if err != nil {
					out = append(out, report.PerfResult{Workload: s.Name(), Arm: string(arm), Run: run, Error: err.Error()})
					continue
				}
				out = append(out, h.RunPerfWorkload(ctx, e, arm, run))
			}
		}
	}
	return out
}

// RunPerfWorkload replays one expanded workload under one arm on a fresh
// sandbox.
func (h *Harness) RunPerfWorkload(ctx context.Context, e *schedperf.Expanded, arm Arm, run int) report.PerfResult {
	res := report.PerfResult{Workload: e.Name, Arm: string(arm), Run: run, Nodes: e.NodeCount(), MeasuredPods: e.MeasuredPods()}
	for _, s := range e.Steps {
		res.Pods += len(s.Pods)
		res.PodGroups += len(s.PodGroups)
	}
	tag := fmt.Sprintf("%s [%s #%d]", e.Name, arm, run)
	if arm == ArmCeiling {
		res.Skipped = "the bind ceiling does not replay scheduler_perf workloads"
		h.opts.Logf("%s: skipped: %s", tag, res.Skipped)
		return res
	}
	if err := h.runPerf(ctx, e, arm, &res, tag); err != nil {
		res.Error = err.Error()
		h.opts.Logf("%s: FAILED: %v", tag, err)
		return res
	}
	tp := "no throughput sample (window under 2 s)"
	if t := res.Throughput; t != nil {
		tp = fmt.Sprintf("SchedulingThroughput avg %.1f pods/s", t.Average)
	}
	placement := "placement ok"
	if !res.Verdict.OK() {
		placement = "PLACEMENT VIOLATED: " + strings.Join(res.Verdict.Problems, "; ")
	}
	h.opts.Logf("%s: %d/%d pods scheduled (%s), %d victims, measured %d pods in %.2fs, %s; %s", tag,
		res.Pods-res.Unscheduled-res.Victims, res.Pods-res.Victims, res.Stop, res.Victims, res.MeasuredPods, res.DurationSeconds, tp, placement)
	return res
}

func (h *Harness) runPerf(ctx context.Context, e *schedperf.Expanded, arm Arm, res *report.PerfResult, tag string) error {
	runtime.GC()
	debug.FreeOSMemory()
	setup := time.Now()
	phalanxCfg, err := phalanxPerfConfig(h.perfPhalanxBase(), e.SchedulerConfigPath)
	if err != nil {
		return err
	}
	if e.Gates[podGroupClaimsGate] {
		// The workload's PodGroups share claims among more pods than a
		// claim's reservedFor holds; upstream reserves them for the
		// PodGroup under this gate, Phalanx under PhalanxDynamicResources.
		if phalanxCfg, err = config.WithPodGroupClaimReservation(phalanxCfg); err != nil {
			return err
		}
	}
	var cl *sandbox.Cluster
	for try := 1; try <= sandboxStartTries; try++ {
		// scheduler_perf's API server runs without the Priority admission
		// plugin: its templates set spec.priority without a PriorityClass.
		// Upstream's runner runs the resourceclaim controller beside the
		// scheduler, and the API server with the workload's gates.
		cl, err = sandbox.Start(ctx, sandbox.Options{SchedulerConfig: phalanxCfg, DisableAdmission: []string{"Priority"},
			ClaimController: true, ExtraGates: workloadExtraGates(e.Gates), ExtraAPIs: workloadAPIs(e.Gates)})
		if err == nil || ctx.Err() != nil {
			break
		}
		h.opts.Logf("%s: sandbox start %d of %d failed: %v", tag, try, sandboxStartTries, err)
	}
	if err != nil {
		return fmt.Errorf("start sandbox: %w", err)
	}
	defer cl.Stop()
	pods, err := trackPods(ctx, cl.Client)
	if err != nil {
		return err
	}
	defer pods.stop()

	dir := filepath.Join(h.opts.WorkDir, fmt.Sprintf("%s-%s-%d", strings.ReplaceAll(e.Name, "/", "_"), arm, res.Run))
	a, err := h.startPerfArm(ctx, cl, e, arm, phalanxCfg, dir, res)
	if err != nil {
		return err
	}
	stopped := false
	defer func() {
		if !stopped {
			a.stop()
		}
	}()
	if err := a.waitReady(ctx); err != nil {
		return err
	}
	res.SetupSeconds = time.Since(setup).Seconds()
	h.opts.Logf("%s: sandbox and scheduler ready in %.1fs; replaying %d operations", tag, res.SetupSeconds, len(e.Steps))

	r := &replay{cl: cl, pods: pods, arm: a, res: res, namespaces: map[string]bool{}, logf: func(format string, args ...any) {
		h.opts.Logf("%s: "+format, append([]any{tag}, args...)...)
	}}
	replayErr := r.run(ctx, e.Steps)
	res.LoadAverage = loadAverage()
	a.measure(ctx, res)
	stopped = true
	a.stop()
	if replayErr != nil {
		return replayErr
	}
	return r.check(ctx)
}

// perfPhalanxBase is the Phalanx profile the Phalanx arms run:
// Options.PhalanxConfig or config/second-scheduler.yaml.
func (h *Harness) perfPhalanxBase() []byte {
	if h.opts.PhalanxConfig != nil {
		return h.opts.PhalanxConfig
	}
	return phalanxConfig()
}

// phalanxPerfConfig maps a workload's scheduler configuration to Phalanx's:
// every profile name the workload's own configuration serves (or
// default-scheduler, when it has none) is served by a copy of the first
// profile of base. The workload's own plugin settings are for upstream's
// in-tree plugins and are not carried over.
// podGroupClaimsGate is upstream's gate for claims of PodGroups reserved
// for the PodGroup.
const podGroupClaimsGate = "DRAWorkloadResourceClaims"

func phalanxPerfConfig(base []byte, workloadConfig string) ([]byte, error) {
	names := []string{corev1.DefaultSchedulerName}
	if workloadConfig != "" {
		data, err := os.ReadFile(workloadConfig)
		if err != nil {
			return nil, err
		}
		var own struct {
			Profiles []struct {
				SchedulerName string `json:"schedulerName"`
			} `json:"profiles"`
		}
		if err := yaml.Unmarshal(data, &own); err != nil {
			return nil, fmt.Errorf("parse %s: %w", workloadConfig, err)
		}
		if len(own.Profiles) > 0 {
			names = names[:0]
			for _, p := range own.Profiles {
				name := p.SchedulerName
				if name == "" {
					name = corev1.DefaultSchedulerName
				}
				names = append(names, name)
			}
		}
	}
	var cfg map[string]any
	if err := yaml.Unmarshal(base, &cfg); err != nil {
		return nil, fmt.Errorf("parse Phalanx scheduler config: %w", err)
	}
	profiles, _ := cfg["profiles"].([]any)
	if len(profiles) == 0 {
		return nil, errors.New("the Phalanx scheduler config has no profile")
	}
	first, _ := profiles[0].(map[string]any)
	var out []any
	for _, name := range names {
		p := make(map[string]any, len(first))
		for k, v := range first {
			p[k] = v
		}
		p["schedulerName"] = name
		out = append(out, p)
	}
	cfg["profiles"] = out
	return yaml.Marshal(cfg)
}

// perfArm is a scheduler started for a replay.
type perfArm interface {
	waitReady(ctx context.Context) error
	// exited is closed when a child scheduler ends on its own (nil for the
	// in-process one).
	exited() <-chan struct{}
	exitError() error
	// measure fills the scheduler's metrics over the run; before stop.
	measure(ctx context.Context, res *report.PerfResult)
	stop()
}

func (h *Harness) startPerfArm(ctx context.Context, cl *sandbox.Cluster, e *schedperf.Expanded, arm Arm, phalanxCfg []byte, dir string, res *report.PerfResult) (perfArm, error) {
	switch arm {
	case ArmPhalanx:
		// Phalanx runs with the workload gates off (the sandbox turns them
		// off while it builds the scheduler); the API server keeps them.
		res.Gates = gateString(map[string]bool{"GenericWorkload": false})
		before, err := inProcessMetrics()
		if err != nil {
			return nil, err
		}
		if _, err := cl.StartScheduler(ctx); err != nil {
			return nil, fmt.Errorf("start in-process Phalanx scheduler: %w", err)
		}
		return &perfInProcess{cl: cl, before: before}, nil
	case ArmUpstream, ArmPhalanxProcess:
		binary, base, gates := h.kubeScheduler, []byte(nil), gateString(e.Gates)
		if e.SchedulerConfigPath != "" {
			data, err := os.ReadFile(e.SchedulerConfigPath)
			if err != nil {
				return nil, err
			}
			base = data
		}
		if arm == ArmPhalanxProcess {
			pg := PhalanxProcessGates()
			for k, v := range workloadExtraGates(e.Gates) {
				if _, off := pg[k]; !off {
					pg[k] = v
				}
			}
			binary, base, gates = h.phalanxScheduler, phalanxCfg, gateString(pg)
			if h.opts.PhalanxGates != "" {
				gates += "," + h.opts.PhalanxGates
			}
		}
		res.Gates = gates
		cfg, err := schedulerConfig(base, cl.KubeconfigPath)
		if err != nil {
			return nil, err
		}
		logPath := filepath.Join(dir, "scheduler.log")
		child, err := startChild(binary, cfg, gates, dir, logPath, h.childFlags(binary)...)
		if err != nil {
			return nil, err
		}
		return &perfChild{child: child}, nil
	default:
		return nil, fmt.Errorf("arm %q does not replay scheduler_perf workloads", arm)
	}
}

type perfInProcess struct {
	cl     *sandbox.Cluster
	before report.Samples
}

func (a *perfInProcess) waitReady(context.Context) error { return nil }
func (a *perfInProcess) exited() <-chan struct{}         { return nil }
func (a *perfInProcess) exitError() error                { return nil }
func (a *perfInProcess) stop()                           { a.cl.StopScheduler() }

func (a *perfInProcess) measure(_ context.Context, res *report.PerfResult) {
	after, err := inProcessMetrics()
	if err != nil {
		return
	}
	fillPerfMetrics(res, a.before, after, "in-process scheduler metrics")
}

type perfChild struct{ child *childScheduler }

func (a *perfChild) exited() <-chan struct{} { return a.child.exited }
func (a *perfChild) exitError() error        { return a.child.exitError() }
func (a *perfChild) stop()                   { a.child.stop() }

func (a *perfChild) waitReady(ctx context.Context) error {
	return (&childArm{child: a.child}).waitReady(ctx, readyTimeout)
}

func (a *perfChild) measure(ctx context.Context, res *report.PerfResult) {
	after, err := a.child.metrics(ctx)
	if err != nil {
		return
	}
	fillPerfMetrics(res, nil, after, "scheduler /metrics")
}

// fillPerfMetrics reads the run's counters and upstream's histograms.
func fillPerfMetrics(res *report.PerfResult, before, after report.Samples, source string) {
	res.Scheduler = report.MetricsBetween(before, after, "", source)
	res.Histograms = map[string]report.Quantiles{}
	for _, hm := range report.PerfHistograms {
		if q, ok := report.HistogramQuantiles(before, after, hm.Name, hm.Match); ok {
			res.Histograms[report.HistogramKey(hm.Name, hm.Match)] = q
		}
	}
}

// replay runs a workload's steps against a sandbox.
type replay struct {
	cl   *sandbox.Cluster
	pods *podTracker
	arm  perfArm
	res  *report.PerfResult
	logf func(format string, args ...any)

	namespaces map[string]bool
	// groups are the PodGroups created, as namespace/name → group.
	groups []report.Group
	// created are the pods created, as namespace/name.
	created  []string
	measured bool
	// window is the measured window while open.
	window *window
	// mapper and dynamic create createAny's objects.
	mapper  meta.ResettableRESTMapper
	dynamic dynamic.Interface
}

func (r *replay) run(ctx context.Context, steps []schedperf.Step) error {
	for _, s := range steps {
		if err := r.step(ctx, s); err != nil {
			return fmt.Errorf("operation %d (%s): %w", s.Op, s.Opcode, err)
		}
		if r.res.Stop != "" && r.res.Stop != "all scheduled" {
			// A wait gave up: the rest of the workload would only wait too.
			return nil
		}
	}
	if r.res.Stop == "" {
		// Nothing to wait for (PublishResourceSlices creates no pods).
		r.res.Stop = "all scheduled"
	}
	return nil
}

func (r *replay) step(ctx context.Context, s schedperf.Step) error {
	switch s.Opcode {
	case schedperf.OpCreateNodes:
		return parallel(createWorkers, len(s.Nodes), func(i int) error { return createPerfNode(ctx, r.cl.Client, s.Nodes[i]) })
	case schedperf.OpCreateNamespaces:
		for _, ns := range s.Namespaces {
			if err := r.ensureNamespace(ctx, ns); err != nil {
				return err
			}
		}
		return nil
	case schedperf.OpCreatePodGroups:
		if err := r.ensureNamespace(ctx, s.Namespace); err != nil {
			return err
		}
		for _, pg := range s.PodGroups {
			g := report.Group{Name: s.Namespace + "/" + pg.Name, MinCount: 1}
			if gang := pg.Spec.SchedulingPolicy.Gang; gang != nil {
				g.MinCount = int(gang.MinCount)
			}
			if sc := pg.Spec.SchedulingConstraints; sc != nil && len(sc.Topology) > 0 {
				g.TopologyKey = sc.Topology[0].Key
			}
			r.groups = append(r.groups, g)
		}
		// Created one after another, as upstream's runner does.
		for _, pg := range s.PodGroups {
			if _, err := r.cl.Client.SchedulingV1beta1().PodGroups(s.Namespace).Create(ctx, pg, metav1.CreateOptions{FieldValidation: "Strict"}); err != nil {
				return fmt.Errorf("create PodGroup %s/%s: %w", s.Namespace, pg.Name, err)
			}
		}
		return nil
	case schedperf.OpCreatePods:
		return r.createPods(ctx, s)
	case schedperf.OpBarrier:
		namespaces := s.Namespaces
		if len(namespaces) == 0 {
			for ns := range r.namespaces {
				namespaces = append(namespaces, ns)
			}
		}
		return r.wait(ctx, "barrier", func() bool {
			return r.pods.pending(namespaces, labels.SelectorFromSet(s.LabelSelector), s.Stage == schedperf.StageAttempted) == 0
		})
	case schedperf.OpSleep:
		select {
		case <-time.After(s.Sleep):
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	case schedperf.OpCreateAny:
		return r.createAny(ctx, s)
	case schedperf.OpAllocResourceClaims:
		return r.allocClaims(ctx, s.Namespace)
	case schedperf.OpStartCollectingMetrics:
		return r.openWindow(s.Namespaces)
	case schedperf.OpStopCollectingMetrics:
		if r.window == nil {
			return errors.New("stopCollectingMetrics without startCollectingMetrics")
		}
		r.closeWindow(true, r.scheduledEvents(r.window.namespaces)-r.window.base)
		return nil
	}
	return fmt.Errorf("opcode %q is not supported", s.Opcode)
}

func (r *replay) ensureNamespace(ctx context.Context, ns string) error {
	if r.namespaces[ns] {
		return nil
	}
	_, err := r.cl.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create namespace %s: %w", ns, err)
	}
	r.namespaces[ns] = true
	return nil
}

// perfProgressEvery is how often a long wait logs its progress.
const perfProgressEvery = 30 * time.Second

// podCreators is how many pods upstream's runner creates at once.
const podCreators = 30

func (r *replay) createPods(ctx context.Context, s schedperf.Step) error {
	if err := r.ensureNamespace(ctx, s.Namespace); err != nil {
		return err
	}
	if s.CollectMetrics {
		if err := r.openWindow([]string{s.Namespace}); err != nil {
			return err
		}
		// Closed below when the pods are scheduled; on every other way out
		// it stops sampling and leaves pods/s unset.
		defer r.closeWindow(false, -1)
	}
	if s.SteadyState {
		scheduled, err := r.steady(ctx, s)
		if err != nil {
			return err
		}
		if s.CollectMetrics {
			r.closeWindow(true, scheduled)
		}
		return nil
	}
	names := make([]string, len(s.Pods))
	err := parallel(min(podCreators, max(len(s.Pods), 1)), len(s.Pods), func(i int) error {
		created, err := r.cl.Client.CoreV1().Pods(s.Namespace).Create(ctx, s.Pods[i].DeepCopy(), metav1.CreateOptions{})
		if err != nil {
			return fmt.Errorf("create pod %d in %s: %w", i, s.Namespace, err)
		}
		names[i] = s.Namespace + "/" + created.Name
		return nil
	})
	if err != nil {
		return err
	}
	r.created = append(r.created, names...)
	if s.SkipWait {
		return nil
	}
	want := len(s.Pods)
	if err := r.wait(ctx, fmt.Sprintf("%d pods of %s scheduled", want, s.Namespace), func() bool {
		return r.pods.scheduledIn(s.Namespace) >= want
	}); err != nil {
		return err
	}
	if s.CollectMetrics {
		r.closeWindow(r.res.Stop == "all scheduled", -1)
	}
	return nil
}

// wait polls done until it holds; it gives up (setting res.Stop, without
// an error) after PerfTimeout or when nothing was scheduled for PerfStall,
// and fails when the scheduler exits.
func (r *replay) wait(ctx context.Context, what string, done func() bool) error {
	start := time.Now()
	deadline := time.NewTimer(PerfTimeout)
	defer deadline.Stop()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	lastReport := start
	for {
		if done() {
			r.res.Stop = "all scheduled"
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-r.arm.exited():
			return r.arm.exitError()
		case <-deadline.C:
			r.res.Stop = fmt.Sprintf("%s: not after %v", what, PerfTimeout)
			r.logf("gave up: %s", r.res.Stop)
			return nil
		case <-tick.C:
			last := r.pods.lastProgress()
			if last.Before(start) {
				last = start
			}
			if time.Since(lastReport) >= perfProgressEvery {
				lastReport = time.Now()
				r.logf("waiting for %s: %s", what, r.pods.progress())
			}
			if time.Since(last) > PerfStall {
				r.res.Stop = fmt.Sprintf("%s: nothing scheduled for %v", what, PerfStall)
				r.logf("gave up: %s", r.res.Stop)
				return nil
			}
		}
	}
}

// check judges the final placement of every pod the workload created:
// every one scheduled, every gang all-or-nothing and in one domain of its
// topology key, no node overcommitted. A group that lost members to
// preemption is judged on capacity only: how much of it an eviction
// leaves is the victim's disruption mode's business, not its scheduling.
func (r *replay) check(ctx context.Context) error {
	podList, err := r.cl.Client.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list pods for the placement check: %w", err)
	}
	nodeList, err := r.cl.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list nodes for the placement check: %w", err)
	}
	exists := map[string]*corev1.Pod{}
	var pods []*corev1.Pod
	for i := range podList.Items {
		p := podList.Items[i]
		key := p.Namespace + "/" + p.Name
		// Qualified names: upstream's workloads reuse pod names across
		// namespaces.
		p.Name = key
		exists[key] = &p
		pods = append(pods, &p)
	}
	nodes := make([]*corev1.Node, len(nodeList.Items))
	for i := range nodeList.Items {
		nodes[i] = &nodeList.Items[i]
	}
	members := map[string][]string{}
	lost := map[string]bool{}
	for _, key := range r.created {
		p := exists[key]
		if p == nil {
			r.res.Victims++
		} else if p.Spec.NodeName == "" {
			r.res.Unscheduled++
		}
	}
	for _, key := range r.created {
		ns, _, _ := strings.Cut(key, "/")
		p := exists[key]
		var group string
		if p != nil && p.Spec.SchedulingGroup != nil && p.Spec.SchedulingGroup.PodGroupName != nil {
			group = ns + "/" + *p.Spec.SchedulingGroup.PodGroupName
		}
		if p == nil {
			// Which group a deleted pod belonged to is not known from the
			// API any more; its namespace's groups are marked below.
			lost[ns] = true
			continue
		}
		if group != "" {
			members[group] = append(members[group], key)
		}
	}
	var groups []report.Group
	disrupted := 0
	for _, g := range r.groups {
		ns, _, _ := strings.Cut(g.Name, "/")
		g.Members = members[g.Name]
		if lost[ns] && len(g.Members) < g.MinCount {
			disrupted++
			continue
		}
		groups = append(groups, g)
	}
	classes, err := r.cl.Client.ResourceV1().DeviceClasses().List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list device classes for the placement check: %w", err)
	}
	cp := make([]*resourceapi.DeviceClass, len(classes.Items))
	for i := range classes.Items {
		cp[i] = &classes.Items[i]
	}
	r.res.Verdict = report.CheckWithDevices(groups, nodes, pods, report.DeviceBackedResources(cp))
	if err := checkPerfDevices(ctx, r.cl, pods, &r.res.Verdict); err != nil {
		return err
	}
	if disrupted > 0 {
		r.logf("%d PodGroups lost members to preemption and are judged on capacity only", disrupted)
	}
	return nil
}

// createPerfNode creates a node with its status in one request, as
// upstream's runner does; the status is written separately only if the
// API server dropped it.
func createPerfNode(ctx context.Context, client kubernetes.Interface, n *corev1.Node) error {
	created, err := client.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("create node %s: %w", n.Name, err)
	}
	if len(created.Status.Allocatable) == 0 && len(n.Status.Allocatable) > 0 {
		created.Status = n.Status
		if _, err := client.CoreV1().Nodes().UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("set status of node %s: %w", n.Name, err)
		}
	}
	return nil
}

// podTracker follows every pod of the cluster: how many of a namespace
// are scheduled now, how many became scheduled since the start (upstream's
// throughput counts these), and which were attempted.
type podTracker struct {
	mu        sync.Mutex
	pods      map[string]*corev1.Pod // namespace/name
	scheduled map[string]int
	events    map[string]int
	deleted   int
	last      time.Time
	cancel    context.CancelFunc
}

func trackPods(ctx context.Context, client kubernetes.Interface) (*podTracker, error) {
	ctx, cancel := context.WithCancel(ctx)
	t := &podTracker{pods: map[string]*corev1.Pod{}, scheduled: map[string]int{}, events: map[string]int{}, cancel: cancel}
	factory := informers.NewSharedInformerFactory(client, 0)
	inf := factory.Core().V1().Pods().Informer()
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { t.update(obj) },
		UpdateFunc: func(_, obj any) { t.update(obj) },
		DeleteFunc: func(obj any) {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			if p, ok := obj.(*corev1.Pod); ok {
				t.remove(p)
			}
		},
	}); err != nil {
		cancel()
		return nil, err
	}
	factory.Start(ctx.Done())
	go func() {
		<-ctx.Done()
		factory.Shutdown()
	}()
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		cancel()
		return nil, errors.New("pod informer did not sync")
	}
	return t, nil
}

func (t *podTracker) stop() { t.cancel() }

func (t *podTracker) update(obj any) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	key := p.Namespace + "/" + p.Name
	t.mu.Lock()
	defer t.mu.Unlock()
	old := t.pods[key]
	t.pods[key] = p
	if (old == nil || old.Spec.NodeName == "") && p.Spec.NodeName != "" {
		t.scheduled[p.Namespace]++
		t.events[p.Namespace]++
		t.last = time.Now()
	}
}

func (t *podTracker) remove(p *corev1.Pod) {
	key := p.Namespace + "/" + p.Name
	t.mu.Lock()
	defer t.mu.Unlock()
	if old := t.pods[key]; old != nil && old.Spec.NodeName != "" {
		t.scheduled[p.Namespace]--
	}
	delete(t.pods, key)
	t.deleted++
	t.last = time.Now()
}

func (t *podTracker) scheduledIn(ns string) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.scheduled[ns]
}

func (t *podTracker) scheduledEvents(ns string) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.events[ns]
}

// lastProgress is when a pod was last scheduled or deleted.
func (t *podTracker) lastProgress() time.Time {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.last
}

// progress describes the cluster's pods for a log line.
func (t *podTracker) progress() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	var parts []string
	for ns, n := range t.scheduled {
		parts = append(parts, fmt.Sprintf("%s %d", ns, n))
	}
	sort.Strings(parts)
	return fmt.Sprintf("%d pods, %d deleted; scheduled by namespace: %s", len(t.pods), t.deleted, strings.Join(parts, ", "))
}

// pending counts the pods of namespaces matching sel that are not yet
// scheduled (or, with attempted, not yet tried: no PodScheduled condition).
func (t *podTracker) pending(namespaces []string, sel labels.Selector, attempted bool) int {
	want := map[string]bool{}
	for _, ns := range namespaces {
		want[ns] = true
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for _, p := range t.pods {
		if !want[p.Namespace] || !sel.Matches(labels.Set(p.Labels)) || p.Spec.NodeName != "" {
			continue
		}
		if attempted && hasPodScheduledCondition(p) {
			continue
		}
		n++
	}
	return n
}

func hasPodScheduledCondition(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled {
			return true
		}
	}
	return false
}
