package bench

import (
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"k8s.io/component-base/metrics/legacyregistry"

	"github.com/phalanx-sched/phalanx/tools/bench/report"
	"github.com/phalanx-sched/phalanx/tools/sandbox"
)

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
		var err error
		if c.Starvation != nil && c.Starvation.Reservation != nil {
			// The case's own plugin arguments; the sandbox started with none.
			var cfg []byte
			if cfg, err = phalanxConfigFor(c, phalanxConfig()); err == nil {
				err = cl.RestartScheduler(cfg)
			}
		} else {
			_, err = cl.StartScheduler(ctx)
		}
		if err != nil {
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
			// What the in-process arm's scheduler runs with: the API server
			// serves the workload API, but the scheduler's own workload
			// scheduling is off (phalanx-scheduler refuses GenericWorkload:
			// one scheduler per group).
			binary, base, profile, gates = h.phalanxScheduler, phalanxConfig(), phalanxSchedulerName, gateString(PhalanxProcessGates())
			if h.opts.PhalanxConfig != nil {
				base = h.opts.PhalanxConfig
			}
			var err error
			if base, err = phalanxConfigFor(c, base); err != nil {
				return nil, err
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
	case ArmKueueTAS:
		// kube-scheduler binds where Kueue's TAS put each pod; the window
		// starts as the held ClusterQueue starts admitting.
		a, err := h.startChildArm(ctx, cl, h.kubeScheduler, nil, upstreamSchedulerName, h.opts.UpstreamGates, dir, res)
		if err != nil {
			return nil, err
		}
		k := newKueueArm(a, cl.KueuePID())
		if err := releaseKueue(ctx, cl.KueueClient()); err != nil {
			a.stop(res)
			return nil, err
		}
		return k, nil
	case ArmCeiling:
		b, err := startBinder(ctx, cl.Client, ns, c, h.opts.BinderWorkers, created)
		if err != nil {
			return nil, err
		}
		return &binderArm{b: b}, nil
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
	child, err := startChild(binary, cfg, gates, dir, res.LogPath, h.childFlags(binary)...)
	if err != nil {
		return nil, err
	}
	a := &childArm{child: child, profile: profile, stopProfiles: func() {}}
	var stops []func()
	background := func(run func(stop <-chan struct{})) {
		stop, done := make(chan struct{}), make(chan struct{})
		go func() {
			defer close(done)
			run(stop)
		}()
		stops = append(stops, func() {
			close(stop)
			<-done
		})
	}
	if h.opts.CPUProfileDir != "" {
		background(func(stop <-chan struct{}) {
			child.profile(ctx, stop, filepath.Join(h.opts.CPUProfileDir, filepath.Base(dir)+"-scheduler"))
		})
	}
	if h.opts.HeapProfileDir != "" {
		if err := os.MkdirAll(h.opts.HeapProfileDir, 0o755); err != nil {
			return nil, err
		}
		a.heapPrefix = filepath.Join(h.opts.HeapProfileDir, filepath.Base(dir)+"-scheduler-heap")
		background(func(stop <-chan struct{}) { child.heapAtPeak(ctx, stop, a.heapPrefix+"-peak.pprof") })
	}
	a.stopProfiles = func() {
		for _, s := range stops {
			s()
		}
	}
	return a, nil
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

// inProcessArm is Phalanx in the harness process: ready once started, its
// metrics in this process's registry, its memory not separable from the
// API server's and etcd's.
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

func (a *inProcessArm) stop(*report.Result) { a.cl.StopScheduler() }

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

// childArm is a scheduler binary run as a child process, measured through
// its /metrics and its own peak RSS.
type childArm struct {
	child        *childScheduler
	profile      string
	stopProfiles func()
	// heapPrefix names the heap profiles written with HeapProfileDir.
	heapPrefix string
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
	if a.heapPrefix != "" {
		_ = a.child.heapProfile(ctx, a.heapPrefix+"-end.pprof", false)
		_ = a.child.heapProfile(ctx, a.heapPrefix+"-live.pprof", true)
	}
}

func (a *childArm) stop(res *report.Result) {
	a.stopProfiles()
	res.SchedulerCPUSeconds = a.child.stop().Seconds()
}

// binderArm is the bind ceiling: no scheduler, the harness's workers bind.
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

// PhalanxProcessGates are the feature gates of the phalanx-proc arm's
// scheduler: those of the sandbox's in-process scheduler.
func PhalanxProcessGates() map[string]bool { return sandbox.SchedulerWorkloadGatesOff() }

// childFlags are the flags binary takes beyond kube-scheduler's:
// phalanx-scheduler's diagnostics port is turned off, so that child
// schedulers of concurrent runs do not collide on its default port.
func (h *Harness) childFlags(binary string) []string {
	if binary != "" && binary == h.phalanxScheduler {
		return []string{"--phalanx-port=0"}
	}
	return nil
}
