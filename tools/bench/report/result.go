// Package report holds what a benchmark run measured and how it is judged:
// the per-arm Result, the placement Verdict (all-or-nothing gangs, topology
// constraints, node capacity), scheduler-metric parsing, statistics and the
// comparison table. It links no API server, so it is cheap to test; the
// harness that produces Results is the parent package.
package report

import (
	"os"
	"runtime"
	"strings"
	"time"
)

// Arrival modes of Result.Arrival.
const (
	// ArrivalPrecreated: nodes, groups and pods exist before the scheduler
	// starts (upstream scheduler_perf's pre-created mode).
	ArrivalPrecreated = "precreated"
	// ArrivalLive: the scheduler is started and ready first, then the
	// harness creates the groups and pods as fast as the API accepts them.
	ArrivalLive = "live"
)

// Memory scopes of Result.PeakRSSBytes.
const (
	// ScopeScheduler is the peak RSS of a scheduler running as its own process.
	ScopeScheduler = "scheduler process"
	// ScopeHarness is the peak RSS of the harness process, which holds the
	// API server, etcd and, for in-process arms, the scheduler or binder.
	ScopeHarness = "harness process"
)

// Result is one arm's run of one case.
type Result struct {
	Case string `json:"case"`
	Arm  string `json:"arm"`
	// Run numbers repeats from 1.
	Run int `json:"run"`
	// Arrival is how the pods reached the scheduler: ArrivalPrecreated (all
	// created before the scheduler started) or ArrivalLive (created by the
	// harness while the scheduler ran).
	Arrival string `json:"arrival"`
	// Skipped, when set, says why the arm does not apply to the case
	// (for example the bind ceiling on a preemption case); nothing ran.
	Skipped string `json:"skipped,omitempty"`
	// Gates are the feature gates of the scheduler, "k=v,k=v".
	Gates string `json:"gates,omitempty"`
	// Dialect is the API a Phalanx arm's gangs were written in: "phalanx"
	// (its CRDs and label) or "native" (scheduling.k8s.io/v1beta1 PodGroups
	// and spec.schedulingGroup, as the upstream arm's); empty for the
	// other arms.
	Dialect string `json:"dialect,omitempty"`

	Nodes  int `json:"nodes"`
	Pods   int `json:"pods"`
	Groups int `json:"groups"`

	// SetupSeconds is the time to start the sandbox and create nodes,
	// groups and pods (precreated) or start the scheduler (live), before
	// the measured window.
	SetupSeconds float64 `json:"setupSeconds"`
	// The measured window starts when the scheduler (or binder) is started
	// (precreated), or at the first pod creation (live; the scheduler was
	// started and ready before). FirstBindSeconds and LastBindSeconds are
	// offsets from the window's start. ReadySeconds is how long after its
	// start the scheduler had synced its informers (in-process:
	// StartScheduler returned; child process: /readyz answered 200): inside
	// the window for precreated runs, before it for live ones; zero when
	// not observed.
	ReadySeconds     float64 `json:"readySeconds,omitempty"`
	FirstBindSeconds float64 `json:"firstBindSeconds"`
	LastBindSeconds  float64 `json:"lastBindSeconds"`
	// CreateSeconds (live only) is how long the harness took to create
	// every group and pod, from the window's start.
	CreateSeconds float64 `json:"createSeconds,omitempty"`
	// PodsPerSecond is bound pods / LastBindSeconds.
	PodsPerSecond float64 `json:"podsPerSecond"`
	// Group times: per gang, the offset at which its last member bound.
	// Zero when the case has no gangs or none completed.
	FirstGroupSeconds float64 `json:"firstGroupSeconds,omitempty"`
	GroupP50Seconds   float64 `json:"groupP50Seconds,omitempty"`
	GroupP99Seconds   float64 `json:"groupP99Seconds,omitempty"`

	// Scheduler is what the scheduler's own metrics counted over the
	// measured window; nil when they could not be read.
	Scheduler *SchedulerMetrics `json:"scheduler,omitempty"`
	// APIRequests counts the requests the (in-process) API server served
	// during the measured window, by "VERB resource[.group][/subresource]":
	// binds, status writes, events, leases of whatever ran.
	APIRequests map[string]float64 `json:"apiRequests,omitempty"`
	// FailedSchedulingEvents sums the count of FailedScheduling events on
	// the case's pods. The event recorder merges repeats of one message, so
	// this is a lower bound on failed attempts.
	FailedSchedulingEvents int `json:"failedSchedulingEvents"`

	// PeakRSSBytes is VmHWM of the process named by MemoryScope.
	PeakRSSBytes uint64 `json:"peakRSSBytes"`
	MemoryScope  string `json:"memoryScope"`
	// HarnessPeakRSSBytes is VmHWM of the harness process over the measured
	// window, for every arm: with a child-process scheduler it is the API
	// server's and etcd's share alone.
	HarnessPeakRSSBytes uint64 `json:"harnessPeakRSSBytes"`
	// SchedulerCPUSeconds is user+system CPU of a scheduler process; zero
	// for in-process arms, whose CPU is in HarnessCPUSeconds.
	SchedulerCPUSeconds float64 `json:"schedulerCPUSeconds,omitempty"`
	// ControllerCPUSeconds and ControllerPeakRSSBytes are those of an
	// arm's own controller process, which runs beside its scheduler
	// (scheduler-plugins' PodGroup controller; Kueue's manager for
	// kueue-tas, its CPU over the measured window); zero for other arms.
	ControllerCPUSeconds   float64 `json:"controllerCPUSeconds,omitempty"`
	ControllerPeakRSSBytes uint64  `json:"controllerPeakRSSBytes,omitempty"`
	// HarnessCPUSeconds is this process's CPU during the measured window:
	// API server, etcd, the bind watcher, and any in-process scheduler.
	HarnessCPUSeconds float64 `json:"harnessCPUSeconds"`

	// LoadAverage is the machine's 1-minute load average at the end of the
	// measured window: on a shared machine, other work competes for the
	// same cores.
	LoadAverage float64 `json:"loadAverage,omitempty"`

	Verdict Verdict `json:"verdict"`
	// Fragmentation (cases with a topology constraint) is how many racks
	// could host one more gang of the case's shape after the run.
	Fragmentation *Fragmentation `json:"fragmentation,omitempty"`
	// Spread (cases that ask for it) is how many racks each gang used.
	Spread *Spread `json:"spread,omitempty"`
	// Ring (cases that ask for it) is how often each gang's ring of ranks
	// crosses each level's boundaries.
	Ring *Ring `json:"ring,omitempty"`
	// Preemption (preemption cases) is what happened to the low-priority
	// gangs; the measured window and group times are the high-priority
	// gang's.
	Preemption *Preemption `json:"preemption,omitempty"`
	// Starvation (starvation cases) is the big gang's start and the small
	// jobs' throughput, wait and the cluster's utilisation over the
	// case's window.
	Starvation *Starvation `json:"starvation,omitempty"`
	// Stop says why the measured window ended: "all bound", "stalled" or
	// "deadline".
	Stop string `json:"stop"`
	// Error is set when the arm could not run at all.
	Error   string `json:"error,omitempty"`
	LogPath string `json:"logPath,omitempty"`
}

// SchedulerMetrics are a scheduler's own metrics (k8s.io/kubernetes
// pkg/scheduler/metrics) over the measured window. Phalanx and upstream
// run the same scheduler core, so these compare like with like.
type SchedulerMetrics struct {
	// AttemptsPerBoundPod is the mean of scheduler_pod_scheduling_attempts:
	// how many times a bound pod was popped from the queue before it bound.
	AttemptsPerBoundPod float64 `json:"attemptsPerBoundPod"`
	// Totals of scheduler_schedule_attempts_total by result.
	Scheduled     float64 `json:"scheduled"`
	Unschedulable float64 `json:"unschedulable"`
	Error         float64 `json:"error"`
	// PodGroupAttempts is scheduler_podgroup_schedule_attempts_total
	// (upstream's pod-group cycle; zero for Phalanx, which has none).
	PodGroupAttempts float64 `json:"podGroupAttempts"`
	// Plans is how many hierarchy plans Phalanx made
	// (phalanx_plan_duration_seconds_count): about one per gang when
	// members pass from the stored plan, one per member when they do not.
	Plans float64 `json:"plans,omitempty"`
	// PhaseSeconds is where the scheduler's time went: the summed duration
	// of every extension point (framework_extension_point_duration_seconds
	// by extension_point), of whole pod scheduling attempts
	// ("SchedulingAttempt"), of the algorithm part of them
	// ("SchedulingAlgorithm"), of pods waiting in Permit ("PermitWait"),
	// and of upstream's pod-group cycles ("PodGroupAttempt",
	// "PodGroupAlgorithm"). Phases overlap: binding runs concurrently
	// with the next scheduling cycle.
	PhaseSeconds map[string]float64 `json:"phaseSeconds,omitempty"`
	// Source says where the numbers come from.
	Source string `json:"source"`
}

// Machine describes where a benchmark ran.
type Machine struct {
	CPUs      int    `json:"cpus"`
	CPUModel  string `json:"cpuModel,omitempty"`
	MemoryKiB uint64 `json:"memoryKiB,omitempty"`
	GoVersion string `json:"goVersion"`
	OS        string `json:"os"`
	Hostname  string `json:"hostname,omitempty"`
}

// File is the JSON document a benchmark writes.
type File struct {
	Command  string    `json:"command"`
	Started  time.Time `json:"started"`
	Machine  Machine   `json:"machine"`
	Results  []Result  `json:"results"`
	Comments []string  `json:"comments,omitempty"`
}

// ThisMachine describes the current machine from /proc where available.
func ThisMachine() Machine {
	m := Machine{CPUs: runtime.NumCPU(), GoVersion: runtime.Version(), OS: runtime.GOOS + "/" + runtime.GOARCH}
	m.Hostname, _ = os.Hostname()
	if data, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(data), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPUModel = strings.TrimSpace(v)
				break
			}
		}
	}
	if data, err := os.ReadFile("/proc/meminfo"); err == nil {
		m.MemoryKiB = ProcField(string(data), "MemTotal")
	}
	return m
}

// ProcField returns the kB value of a "Name:   1234 kB" line of a
// /proc/<pid>/status or /proc/meminfo text, or 0.
func ProcField(text, name string) uint64 {
	for _, line := range strings.Split(text, "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok || k != name {
			continue
		}
		fields := strings.Fields(v)
		if len(fields) == 0 {
			return 0
		}
		var n uint64
		for _, c := range fields[0] {
			if c < '0' || c > '9' {
				return 0
			}
			n = n*10 + uint64(c-'0')
		}
		return n
	}
	return 0
}
