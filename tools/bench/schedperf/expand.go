package schedperf

import (
	"fmt"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	schedv1beta1 "k8s.io/api/scheduling/v1beta1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// HostnameLabel is set on every node to its name, as scheduler_perf does.
const HostnameLabel = "kubernetes.io/hostname"

// Stage requirements of a barrier.
const (
	StageScheduled = "Scheduled"
	StageAttempted = "Attempted"
)

// Step is one operation of a workload with its objects rendered.
type Step struct {
	// Op is the operation's index in the workload template.
	Op     int
	Opcode string
	// Nodes to create (createNodes).
	Nodes []*corev1.Node
	// Namespaces to create (createNamespaces) or to wait for (barrier;
	// every namespace pods were created in when empty).
	Namespaces []string
	// Namespace of PodGroups or Pods.
	Namespace string
	PodGroups []*schedv1beta1.PodGroup
	Pods      []*corev1.Pod
	// createPods: measure these pods' scheduling; do not wait for it.
	CollectMetrics bool
	SkipWait       bool
	// createPods in steady state: Pods are the first ones; for Duration,
	// every pod of Namespace scheduled is deleted and NewPod(i) created
	// (i counting on from len(Pods)).
	SteadyState bool
	Duration    time.Duration
	NewPod      func(i int) (*corev1.Pod, error)
	// createAny: the objects, created in Namespace ("" for cluster-scoped
	// ones), one after another.
	Objects []*unstructured.Unstructured
	// barrier.
	Stage         string
	LabelSelector map[string]string
	// sleep.
	Sleep time.Duration
}

// Expanded is one workload ready to replay.
type Expanded struct {
	// Name is "<test case>/<workload>".
	Name   string
	Labels []string
	// Gates are the feature gates the workload asks for.
	Gates map[string]bool
	// SchedulerConfigPath is the test case's own KubeSchedulerConfiguration
	// (absolute), or "" for kube-scheduler's defaults.
	SchedulerConfigPath string
	Steps               []Step
}

// MeasuredPods counts the pods of the steps that collect metrics.
func (e *Expanded) MeasuredPods() int {
	n := 0
	for _, s := range e.Steps {
		if s.CollectMetrics && !s.SteadyState {
			n += len(s.Pods)
		}
	}
	return n
}

// SteadyState is how long the measured operation keeps its pods in a
// steady state (0 when it does not).
func (e *Expanded) SteadyState() time.Duration {
	for _, s := range e.Steps {
		if s.CollectMetrics && s.SteadyState {
			return s.Duration
		}
	}
	return 0
}

// NodeCount counts the nodes the workload creates.
func (e *Expanded) NodeCount() int {
	n := 0
	for _, s := range e.Steps {
		n += len(s.Nodes)
	}
	return n
}

// Expand renders every object of workload w of tc.
func Expand(tc *TestCase, w *Workload) (*Expanded, error) {
	e := &Expanded{
		Name:   tc.Name + "/" + w.Name,
		Labels: append(append([]string(nil), tc.Labels...), w.Labels...),
		Gates:  tc.Gates(w),
	}
	if tc.SchedulerConfigPath != "" {
		e.SchedulerConfigPath = tc.path(tc.SchedulerConfigPath)
	}
	for i := range tc.WorkloadTemplate {
		op := &tc.WorkloadTemplate[i]
		step, err := tc.expandOp(op, i, w)
		if err != nil {
			return nil, fmt.Errorf("%s: operation %d (%s): %w", e.Name, i, op.Opcode, err)
		}
		e.Steps = append(e.Steps, step)
	}
	return e, nil
}

func (tc *TestCase) path(p string) string {
	if filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(tc.dir, p)
}

func (tc *TestCase) expandOp(op *Op, index int, w *Workload) (Step, error) {
	step := Step{Op: index, Opcode: op.Opcode}
	params, err := resolveParams(op.TemplateParams, w)
	if err != nil {
		return step, err
	}
	switch op.Opcode {
	case OpCreateNodes:
		n, err := op.count(w)
		if err != nil {
			return step, err
		}
		render := func(int, int) (*corev1.Node, error) { return defaultNode(index), nil }
		if op.NodeTemplatePath != "" {
			t, err := parseTemplate(tc.path(op.NodeTemplatePath))
			if err != nil {
				return step, err
			}
			render = func(i, count int) (*corev1.Node, error) {
				node := &corev1.Node{}
				return node, t.render(params, i, count, node)
			}
		}
		for i := range n {
			node, err := render(i, n)
			if err != nil {
				return step, err
			}
			if node.Name == "" {
				if node.GenerateName == "" {
					return step, fmt.Errorf("node template gives neither metadata.name nor metadata.generateName")
				}
				// scheduler_perf appends a random suffix; an index keeps
				// runs comparable and names unique within the op.
				node.Name = fmt.Sprintf("%s%05d", node.GenerateName, i)
				node.GenerateName = ""
			}
			if node.Labels == nil {
				node.Labels = map[string]string{}
			}
			node.Labels[HostnameLabel] = node.Name
			if node.Status.Allocatable == nil {
				node.Status.Allocatable = node.Status.Capacity.DeepCopy()
			}
			step.Nodes = append(step.Nodes, node)
		}
	case OpCreateNamespaces:
		if op.Prefix == "" {
			return step, fmt.Errorf("prefix must be set")
		}
		n, err := op.count(w)
		if err != nil {
			return step, err
		}
		for i := range n {
			step.Namespaces = append(step.Namespaces, fmt.Sprintf("%s-%d", op.Prefix, i))
		}
	case OpCreatePodGroups:
		if op.Namespace == "" || op.TemplatePath == "" {
			return step, fmt.Errorf("namespace and templatePath must be set")
		}
		n, err := op.count(w)
		if err != nil {
			return step, err
		}
		t, err := parseTemplate(tc.path(op.TemplatePath))
		if err != nil {
			return step, err
		}
		step.Namespace = op.Namespace
		for i := range n {
			pg := &schedv1beta1.PodGroup{}
			if err := t.render(params, i, n, pg); err != nil {
				return step, err
			}
			step.PodGroups = append(step.PodGroups, pg)
		}
	case OpCreatePods:
		if op.CollectMetrics && op.SkipWaitToCompletion {
			return step, fmt.Errorf("collectMetrics and skipWaitToCompletion cannot both be set")
		}
		n, err := op.count(w)
		if err != nil {
			return step, err
		}
		step.Namespace = op.Namespace
		if step.Namespace == "" {
			step.Namespace = fmt.Sprintf("namespace-%d", index)
		}
		step.CollectMetrics, step.SkipWait, step.SteadyState = op.CollectMetrics, op.SkipWaitToCompletion, op.SteadyState
		if op.SteadyStateParam != "" {
			v, ok := w.Params[strings.TrimPrefix(op.SteadyStateParam, "$")].(bool)
			if !ok {
				return step, fmt.Errorf("steadyState parameter %s of workload %s is not a bool", op.SteadyStateParam, w.Name)
			}
			step.SteadyState = v
		}
		if step.SteadyState {
			if step.SkipWait {
				return step, fmt.Errorf("skipWaitToCompletion and steadyState cannot both be set")
			}
			if step.Duration, err = opDuration(op, w); err != nil {
				return step, err
			}
			if step.Duration <= 0 {
				return step, fmt.Errorf("steadyState needs a duration > 0")
			}
		}
		path := op.PodTemplatePath
		if path == "" {
			path = tc.DefaultPodTemplatePath
		}
		render := func(int, int) (*corev1.Pod, error) { return defaultPod(), nil }
		if path != "" {
			t, err := parseTemplate(tc.path(path))
			if err != nil {
				return step, err
			}
			render = func(i, count int) (*corev1.Pod, error) {
				pod := &corev1.Pod{}
				return pod, t.render(params, i, count, pod)
			}
		}
		newPod := func(i int) (*corev1.Pod, error) {
			pod, err := render(i, n)
			if err != nil {
				return nil, err
			}
			if pod.Labels == nil {
				pod.Labels = map[string]string{}
			}
			// scheduler_perf labels every pod with its signature (one per
			// pod unless a batch size says otherwise).
			pod.Labels["signature"] = fmt.Sprintf("signature-label-%d", i)
			return pod, nil
		}
		for i := range n {
			pod, err := newPod(i)
			if err != nil {
				return step, err
			}
			step.Pods = append(step.Pods, pod)
		}
		if step.SteadyState {
			step.NewPod = newPod
		}
	case OpCreateAny:
		if op.TemplatePath == "" {
			return step, fmt.Errorf("templatePath must be set")
		}
		n, err := op.count(w)
		if err != nil {
			return step, err
		}
		t, err := parseTemplate(tc.path(op.TemplatePath))
		if err != nil {
			return step, err
		}
		step.Namespace = op.Namespace
		for i := range n {
			obj := &unstructured.Unstructured{}
			if err := t.render(params, i, n, &obj.Object); err != nil {
				return step, err
			}
			if obj.GetKind() == "" || obj.GetAPIVersion() == "" {
				return step, fmt.Errorf("%s renders an object without apiVersion and kind", op.TemplatePath)
			}
			step.Objects = append(step.Objects, obj)
		}
	case OpAllocResourceClaims:
		step.Namespace = op.Namespace
	case OpStartCollectingMetrics:
		if len(op.Namespaces) == 0 {
			return step, fmt.Errorf("namespaces must be set")
		}
		step.Namespaces, step.LabelSelector = op.Namespaces, op.LabelSelector
	case OpStopCollectingMetrics:
	case OpBarrier:
		step.Namespaces, step.LabelSelector = op.Namespaces, op.LabelSelector
		step.Stage = op.StageRequirement
		if step.Stage == "" {
			step.Stage = StageScheduled
		}
		if step.Stage != StageScheduled && step.Stage != StageAttempted {
			return step, fmt.Errorf("stageRequirement %q: want %s or %s", step.Stage, StageScheduled, StageAttempted)
		}
	case OpSleep:
		if step.Sleep, err = opDuration(op, w); err != nil {
			return step, err
		}
	default:
		return step, fmt.Errorf("opcode %q is not supported", op.Opcode)
	}
	return step, nil
}

// opDuration is an op's duration, or the workload parameter it names.
func opDuration(op *Op, w *Workload) (time.Duration, error) {
	d := op.Duration
	if op.DurationParam != "" {
		name := strings.TrimPrefix(op.DurationParam, "$")
		v, ok := w.Params[name].(string)
		if !ok {
			return 0, fmt.Errorf("duration parameter %s of workload %s is not a string", name, w.Name)
		}
		d = v
	}
	out, err := time.ParseDuration(d)
	if err != nil {
		return 0, fmt.Errorf("duration %q: %w", d, err)
	}
	return out, nil
}

// defaultNode is scheduler_perf's node when a createNodes op names no
// template: 4 cpu, 32Gi, 110 pods, Ready.
func defaultNode(op int) *corev1.Node {
	capacity := corev1.ResourceList{
		corev1.ResourcePods:   *resource.NewQuantity(110, resource.DecimalSI),
		corev1.ResourceCPU:    resource.MustParse("4"),
		corev1.ResourceMemory: resource.MustParse("32Gi"),
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{GenerateName: fmt.Sprintf("node-%d-", op)},
		Status: corev1.NodeStatus{
			Capacity:    capacity,
			Allocatable: capacity.DeepCopy(),
			Phase:       corev1.NodeRunning,
			Conditions:  []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
		},
	}
}

// defaultPod is scheduler_perf's pod when a createPods op names no
// template: one pause container asking for 100m cpu and 500Mi memory.
func defaultPod() *corev1.Pod {
	requests := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("100m"),
		corev1.ResourceMemory: resource.MustParse("500Mi"),
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "pod-"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name:      "pause",
			Image:     "registry.k8s.io/pause:3.10.1",
			Ports:     []corev1.ContainerPort{{ContainerPort: 80}},
			Resources: corev1.ResourceRequirements{Limits: requests.DeepCopy(), Requests: requests},
		}}},
	}
}
