// Package schedperf reads the workload configurations of upstream
// kube-scheduler's scheduler_perf benchmark (the performance-config.yaml
// files and their object templates under test/integration/scheduler_perf of
// the k8s.io/kubernetes module) and expands one workload into the objects
// each of its steps creates, so that a harness can replay it against any
// scheduler on any cluster. The files are read where the module lies at run
// time; nothing of them is kept in this repository.
//
// Only the operations the podgroup, workload_preemption and dra workloads
// use are understood (createNodes, createNamespaces, createPodGroups,
// createPods, also in steady state, createAny, allocResourceClaims,
// startCollectingMetrics, stopCollectingMetrics, barrier, sleep); a
// configuration using anything else, or a field this package does not
// know, is refused with the name of what it lacks rather than replayed
// differently. The package links no API server.
package schedperf

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"sigs.k8s.io/yaml"
)

// Dir is where the scheduler_perf workloads live inside the
// k8s.io/kubernetes module.
const Dir = "test/integration/scheduler_perf"

// Label filters as upstream's two runners apply them by default: the
// integration test runs the workloads labelled integration-test and not
// performance; the benchmark runs those labelled performance.
const (
	IntegrationFilter = "integration-test,-performance"
	PerformanceFilter = "performance"
)

// TestCase is one entry of a performance-config.yaml: a template of
// operations shared by workloads that differ in their parameters.
type TestCase struct {
	Name string `json:"name"`
	// FeatureGates the scheduler (and API server) run with.
	FeatureGates map[string]bool `json:"featureGates,omitempty"`
	// SchedulerConfigPath, when set, is the test case's own
	// KubeSchedulerConfiguration, relative to the config file.
	SchedulerConfigPath string `json:"schedulerConfigPath,omitempty"`
	// DefaultPodTemplatePath is used by createPods without its own template.
	DefaultPodTemplatePath string     `json:"defaultPodTemplatePath,omitempty"`
	Labels                 []string   `json:"labels,omitempty"`
	WorkloadTemplate       []Op       `json:"workloadTemplate"`
	Workloads              []Workload `json:"workloads"`
	// Thresholds are upstream's regression limits for its own CI machines;
	// they are read but mean nothing on another machine.
	DefaultThresholdMetricSelector json.RawMessage `json:"defaultThresholdMetricSelector,omitempty"`

	// dir is the directory of the config file: template paths are
	// relative to it.
	dir string
}

// Workload is one parameter set of a TestCase.
type Workload struct {
	Name         string          `json:"name"`
	Labels       []string        `json:"labels,omitempty"`
	Params       map[string]any  `json:"params,omitempty"`
	FeatureGates map[string]bool `json:"featureGates,omitempty"`
	// Threshold and its selector: see TestCase.DefaultThresholdMetricSelector.
	Threshold               json.RawMessage `json:"threshold,omitempty"`
	ThresholdMetricSelector json.RawMessage `json:"thresholdMetricSelector,omitempty"`
}

// Op is one operation of a workload template, with the fields of every
// supported opcode (each opcode reads its own).
type Op struct {
	Opcode string `json:"opcode"`
	// Count, or the workload parameter named by CountParam ("$name"),
	// times the parameter named by CountMultiplierParam.
	Count                *int   `json:"count,omitempty"`
	CountParam           string `json:"countParam,omitempty"`
	CountMultiplierParam string `json:"countMultiplierParam,omitempty"`
	// createNamespaces: namespaces <Prefix>-0 .. <Prefix>-<Count-1>.
	Prefix string `json:"prefix,omitempty"`
	// createPodGroups, createPods: the namespace (createPods defaults to
	// namespace-<op index>).
	Namespace string `json:"namespace,omitempty"`
	// Templates, relative to the config file; createNodes and createPods
	// have built-in defaults.
	NodeTemplatePath string `json:"nodeTemplatePath,omitempty"`
	PodTemplatePath  string `json:"podTemplatePath,omitempty"`
	TemplatePath     string `json:"templatePath,omitempty"`
	// TemplateParams are passed to the template; a string value "$name"
	// (or "$name|default") is the workload parameter name.
	TemplateParams map[string]any `json:"templateParams,omitempty"`
	// createPods: whether the scheduling of these pods is measured, and
	// whether the workload goes on without waiting for them to schedule.
	CollectMetrics       bool `json:"collectMetrics,omitempty"`
	SkipWaitToCompletion bool `json:"skipWaitToCompletion,omitempty"`
	// createPods in steady state: keep Count pods pending for Duration,
	// deleting each pod once scheduled and creating another.
	SteadyState      bool   `json:"steadyState,omitempty"`
	SteadyStateParam string `json:"steadyStateParam,omitempty"`
	// barrier: wait until the pods of these namespaces (all when empty)
	// are scheduled.
	Namespaces       []string          `json:"namespaces,omitempty"`
	LabelSelector    map[string]string `json:"labelSelector,omitempty"`
	StageRequirement string            `json:"stageRequirement,omitempty"`
	// sleep; createPods in steady state.
	Duration      string `json:"duration,omitempty"`
	DurationParam string `json:"durationParam,omitempty"`
}

// Opcodes this package replays.
const (
	OpCreateNodes      = "createNodes"
	OpCreateNamespaces = "createNamespaces"
	OpCreatePodGroups  = "createPodGroups"
	OpCreatePods       = "createPods"
	OpBarrier          = "barrier"
	OpSleep            = "sleep"
	// OpCreateAny creates objects of any kind from a template (the dra
	// workloads' ResourceSlices, DeviceClasses, claims and templates).
	OpCreateAny = "createAny"
	// OpAllocResourceClaims allocates a namespace's claims without pods,
	// so that a cluster starts partly used.
	OpAllocResourceClaims = "allocResourceClaims"
	// OpStartCollectingMetrics and OpStopCollectingMetrics bracket a
	// measured window over the operations between them.
	OpStartCollectingMetrics = "startCollectingMetrics"
	OpStopCollectingMetrics  = "stopCollectingMetrics"
)

var supportedOpcodes = []string{OpCreateNodes, OpCreateNamespaces, OpCreatePodGroups, OpCreatePods, OpBarrier, OpSleep,
	OpCreateAny, OpAllocResourceClaims, OpStartCollectingMetrics, OpStopCollectingMetrics}

// Load reads a performance-config.yaml. Unknown fields are errors: a
// setting this package would ignore would change what is measured.
func Load(path string) ([]*TestCase, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	// Opcodes first: an unsupported operation is named as such, not by
	// the first of its fields this package lacks.
	var ops []struct {
		Name             string `json:"name"`
		WorkloadTemplate []struct {
			Opcode string `json:"opcode"`
		} `json:"workloadTemplate"`
	}
	if err := yaml.Unmarshal(data, &ops); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	for _, tc := range ops {
		for i, op := range tc.WorkloadTemplate {
			if !slices.Contains(supportedOpcodes, op.Opcode) {
				return nil, fmt.Errorf("%s: test case %s: operation %d: opcode %q is not supported (supported: %s)", path, tc.Name, i, op.Opcode, strings.Join(supportedOpcodes, ", "))
			}
		}
	}
	var cases []*TestCase
	if err := yaml.UnmarshalStrict(data, &cases); err != nil {
		return nil, fmt.Errorf("%s: %w (only the fields of the operations %s are supported)", path, err, strings.Join(supportedOpcodes, ", "))
	}
	dir := filepath.Dir(path)
	for _, tc := range cases {
		tc.dir = dir
		for i := range tc.Workloads {
			tc.Workloads[i].Params = normalizeNumbers(tc.Workloads[i].Params)
		}
	}
	return cases, nil
}

// normalizeNumbers turns whole JSON numbers (float64 after decoding) into
// ints, so that a template printing a parameter prints 9999999 and not
// 9.999999e+06.
func normalizeNumbers(m map[string]any) map[string]any {
	for k, v := range m {
		if f, ok := v.(float64); ok && f == math.Trunc(f) && math.Abs(f) < 1<<53 {
			m[k] = int(f)
		}
	}
	return m
}

// Gates are the feature gates of a workload: its test case's, overridden
// by its own.
func (tc *TestCase) Gates(w *Workload) map[string]bool {
	out := map[string]bool{}
	for k, v := range tc.FeatureGates {
		out[k] = v
	}
	for k, v := range w.FeatureGates {
		out[k] = v
	}
	return out
}

// Dir is the directory of the test case's config file.
func (tc *TestCase) Dir() string { return tc.dir }

// Enabled reports whether labels pass a filter in upstream's syntax: every
// entry without a prefix or with "+" must be among labels, every entry with
// "-" must not.
func Enabled(filter string, labels ...string) bool {
	for _, f := range strings.Split(filter, ",") {
		f = strings.TrimSpace(f)
		switch {
		case f == "":
		case strings.HasPrefix(f, "-"):
			if slices.Contains(labels, f[1:]) {
				return false
			}
		default:
			if !slices.Contains(labels, strings.TrimPrefix(f, "+")) {
				return false
			}
		}
	}
	return true
}

// param returns workload parameter ref ("$name") as an int.
func param(w *Workload, ref string) (int, error) {
	if !strings.HasPrefix(ref, "$") {
		return 0, fmt.Errorf("parameter reference %q must start with $", ref)
	}
	v, ok := w.Params[ref[1:]]
	if !ok {
		return 0, fmt.Errorf("workload %s has no parameter %s", w.Name, ref[1:])
	}
	switch n := v.(type) {
	case int:
		return n, nil
	case float64:
		return int(n), nil
	}
	return 0, fmt.Errorf("parameter %s of workload %s is %T, not a number", ref[1:], w.Name, v)
}

// resolveParams substitutes workload parameters into template params.
func resolveParams(in map[string]any, w *Workload) (map[string]any, error) {
	out := make(map[string]any, len(in))
	for k, v := range in {
		s, ok := v.(string)
		if !ok || !strings.HasPrefix(s, "$") {
			out[k] = v
			continue
		}
		name, def, hasDefault := strings.Cut(s[1:], "|")
		if val, ok := w.Params[name]; ok {
			out[k] = val
			continue
		}
		if !hasDefault {
			return nil, fmt.Errorf("template parameter %s: workload %s has no parameter %s", k, w.Name, name)
		}
		var val any
		if err := yaml.Unmarshal([]byte(def), &val); err != nil {
			return nil, fmt.Errorf("template parameter %s: default %q: %w", k, def, err)
		}
		if f, ok := val.(float64); ok && f == math.Trunc(f) {
			val = int(f)
		}
		out[k] = val
	}
	return out, nil
}

// count resolves an op's count.
func (op *Op) count(w *Workload) (int, error) {
	n := 1
	switch {
	case op.CountParam != "":
		v, err := param(w, op.CountParam)
		if err != nil {
			return 0, err
		}
		n = v
	case op.Count != nil:
		n = *op.Count
	}
	if op.CountMultiplierParam != "" {
		m, err := param(w, op.CountMultiplierParam)
		if err != nil {
			return 0, err
		}
		n *= m
	}
	if n < 0 {
		return 0, fmt.Errorf("negative count %d", n)
	}
	return n, nil
}

// Acceptance lists the scheduler_perf directories (under Dir) whose
// workloads are Phalanx's acceptance: upstream's own gang, basic-group,
// topology-aware and workload-preemption benchmarks.
var Acceptance = []string{"podgroup/gangscheduling", "podgroup/basicscheduling", "podgroup/tas", "workload_preemption"}

// DRA lists the directories of upstream's dynamic resource allocation
// benchmarks: claims from templates and shared claims, partitionable
// devices, consumable capacity, device taints, prioritized lists, list
// attributes, compatibility groups, extended resources backed by devices,
// and PodGroups sharing a claim.
var DRA = []string{"dra", "dra/compatibilitygroups", "dra/consumablecapacity", "dra/devicetaints", "dra/extendedresource",
	"dra/extendedresource/scoring", "dra/listattributes", "dra/partitionabledevices", "dra/prioritizedlist", "dra/workloadresourceclaims"}

// Default is what upstream-perf replays unless told otherwise.
var Default = append(append([]string(nil), Acceptance...), DRA...)

// ConfigFile is the name of a directory's workload configuration.
const ConfigFile = "performance-config.yaml"

// Selected is one workload chosen to run.
type Selected struct {
	Case     *TestCase
	Workload *Workload
}

// Name is "<test case>/<workload>".
func (s Selected) Name() string { return s.Case.Name + "/" + s.Workload.Name }

// Labels are the test case's and the workload's labels.
func (s Selected) Labels() []string {
	return append(append([]string(nil), s.Case.Labels...), s.Workload.Labels...)
}

// Expand renders the selected workload.
func (s Selected) Expand() (*Expanded, error) { return Expand(s.Case, s.Workload) }

// Select loads ConfigFile of every dir under root (scheduler_perf's
// directory) and returns the workloads that pass filter (upstream's label
// syntax, see Enabled) and whose name contains one of patterns
// (case-insensitive; all when none), in file order.
func Select(root string, dirs []string, filter string, patterns []string) ([]Selected, error) {
	var out []Selected
	for _, d := range dirs {
		cases, err := Load(filepath.Join(root, d, ConfigFile))
		if err != nil {
			return nil, err
		}
		for _, tc := range cases {
			for i := range tc.Workloads {
				s := Selected{Case: tc, Workload: &tc.Workloads[i]}
				if !Enabled(filter, s.Labels()...) || !matchesAny(s.Name(), patterns) {
					continue
				}
				out = append(out, s)
			}
		}
	}
	return out, nil
}

func matchesAny(name string, patterns []string) bool {
	any := false
	for _, p := range patterns {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		any = true
		if strings.Contains(strings.ToLower(name), strings.ToLower(p)) {
			return true
		}
	}
	return !any
}
