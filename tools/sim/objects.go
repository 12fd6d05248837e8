package sim

import (
	"context"
	"encoding/json"
	"fmt"
	resourceapi "k8s.io/api/resource/v1"
	"reflect"
	"strconv"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	schedv1alpha3 "k8s.io/api/scheduling/v1alpha3"
	schedv1beta1 "k8s.io/api/scheduling/v1beta1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
	sigsjson "sigs.k8s.io/json"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	xv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	v1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
)

const (
	// PodSetLabel marks the plain pods of a PodSet, so reports can show
	// them together.
	PodSetLabel = "sim.phalanx.dev/pod-set"
	// SchedulerName is the schedulerName of generated pods.
	SchedulerName = "phalanx-scheduler"
	// GPUResource is the extended resource simulated nodes offer.
	GPUResource corev1.ResourceName = "nvidia.com/gpu"

	pauseImage = "registry.k8s.io/pause:3.10"

	// runtimeAnnotation tells the sandbox's node agent how many seconds a
	// pod runs before it marks it Succeeded (tools/sandbox's
	// RuntimeAnnotation; this package does not link the sandbox).
	runtimeAnnotation = "sandbox.phalanx.dev/runtime-seconds"
	// reserveAfterAnnotation lengthens reservation.afterSeconds per group
	// (pkg/reservation's ReserveAfterAnnotation).
	reserveAfterAnnotation = "scheduling.phalanx.dev/reserve-after-seconds"
	// reservedCondition is the condition PhalanxTopology writes on a gang's
	// root group about its reservation.
	reservedCondition = "Reserved"
)

// inlineObject is one decoded entry of create.objects.
type inlineObject struct {
	kind string
	obj  metav1.Object
}

// inlineKinds are the objects create.objects accepts, by apiVersion and kind.
var inlineKinds = map[string]func() metav1.Object{
	"v1/Pod":       func() metav1.Object { return &corev1.Pod{} },
	"batch/v1/Job": func() metav1.Object { return &batchv1.Job{} },
	v1alpha1.SchemeGroupVersion.String() + "/PodGroup":          func() metav1.Object { return &v1alpha1.PodGroup{} },
	v1alpha1.SchemeGroupVersion.String() + "/CompositePodGroup": func() metav1.Object { return &v1alpha1.CompositePodGroup{} },
	v1alpha1.SchemeGroupVersion.String() + "/Workload":          func() metav1.Object { return &v1alpha1.Workload{} },
	schedv1beta1.SchemeGroupVersion.String() + "/PodGroup":      func() metav1.Object { return &schedv1beta1.PodGroup{} },
	schedv1alpha3.SchemeGroupVersion.String() + "/CompositePodGroup": func() metav1.Object {
		return &schedv1alpha3.CompositePodGroup{}
	},
	// scheduler-plugins' PodGroup, as the training operators create it.
	xv1alpha1.SchemeGroupVersion.String() + "/PodGroup":                func() metav1.Object { return &xv1alpha1.PodGroup{} },
	resourceapi.SchemeGroupVersion.String() + "/ResourceClaim":         func() metav1.Object { return &resourceapi.ResourceClaim{} },
	resourceapi.SchemeGroupVersion.String() + "/ResourceClaimTemplate": func() metav1.Object { return &resourceapi.ResourceClaimTemplate{} },
	// Kueue's objects, for scenarios with Kueue in front (Scenario.Kueue).
	// All but the LocalQueue are cluster-wide: the teardown deletes them.
	kueue.SchemeGroupVersion.String() + "/LocalQueue":            func() metav1.Object { return &kueue.LocalQueue{} },
	kueue.SchemeGroupVersion.String() + "/ClusterQueue":          func() metav1.Object { return &kueue.ClusterQueue{} },
	kueue.SchemeGroupVersion.String() + "/ResourceFlavor":        func() metav1.Object { return &kueue.ResourceFlavor{} },
	kueue.SchemeGroupVersion.String() + "/Cohort":                func() metav1.Object { return &kueue.Cohort{} },
	kueue.SchemeGroupVersion.String() + "/WorkloadPriorityClass": func() metav1.Object { return &kueue.WorkloadPriorityClass{} },
}

// decodeInline decodes an inline object strictly into its Go type, so a
// misspelt field is reported with its path.
func decodeInline(raw json.RawMessage, p *field.Path) (inlineObject, field.ErrorList) {
	var tm metav1.TypeMeta
	if err := json.Unmarshal(raw, &tm); err != nil {
		return inlineObject{}, field.ErrorList{field.Invalid(p, field.OmitValueType{}, "must be a Kubernetes object with apiVersion, kind and metadata: "+err.Error())}
	}
	newObj, ok := inlineKinds[tm.APIVersion+"/"+tm.Kind]
	if !ok {
		return inlineObject{}, field.ErrorList{field.NotSupported(p.Child("kind"), tm.APIVersion+" "+tm.Kind,
			[]string{"v1 Pod", "batch/v1 Job", "scheduling.phalanx.dev/v1alpha1 PodGroup", "scheduling.phalanx.dev/v1alpha1 CompositePodGroup", "scheduling.phalanx.dev/v1alpha1 Workload",
				"scheduling.k8s.io/v1beta1 PodGroup", "scheduling.k8s.io/v1alpha3 CompositePodGroup", "scheduling.x-k8s.io/v1alpha1 PodGroup",
				"resource.k8s.io/v1 ResourceClaim", "resource.k8s.io/v1 ResourceClaimTemplate",
				"kueue.x-k8s.io/v1beta2 LocalQueue", "kueue.x-k8s.io/v1beta2 ClusterQueue", "kueue.x-k8s.io/v1beta2 ResourceFlavor",
				"kueue.x-k8s.io/v1beta2 Cohort", "kueue.x-k8s.io/v1beta2 WorkloadPriorityClass"})}
	}
	obj := newObj()
	strict, err := sigsjson.UnmarshalStrict(raw, obj)
	if err != nil {
		return inlineObject{}, field.ErrorList{field.Invalid(p, field.OmitValueType{}, err.Error())}
	}
	var errs field.ErrorList
	for _, e := range strict {
		errs = append(errs, field.Invalid(p, field.OmitValueType{}, e.Error()))
	}
	if obj.GetName() == "" {
		errs = append(errs, field.Required(p.Child("metadata", "name"), "objects are created with the name given here"))
	}
	if obj.GetNamespace() != "" {
		errs = append(errs, field.Forbidden(p.Child("metadata", "namespace"), "objects go into the scenario's own namespace; remove it"))
	}
	return inlineObject{kind: tm.Kind, obj: obj}, errs
}

// createObject sends one object to the API server, and remembers a
// cluster-wide one for the teardown.
func (r *runner) createObject(ctx context.Context, o inlineObject) error {
	api := r.api()
	if err := api.create(ctx, o.obj); err != nil {
		return fmt.Errorf("create %s %s: %w", o.kind, o.obj.GetName(), err)
	}
	if res, ok := api.clusterWide[reflect.TypeOf(o.obj)]; ok {
		r.clusterObjects = append(r.clusterObjects, createdObject{api: res, name: o.obj.GetName()})
	}
	return nil
}

// upstreamPodGroup is the scheduling.k8s.io PodGroup an upstream gang
// generator makes, nil for other gangs.
func (g *Gang) upstreamPodGroup() *schedv1beta1.PodGroup {
	if g.API != APIUpstream {
		return nil
	}
	pg := &schedv1beta1.PodGroup{
		TypeMeta:   metav1.TypeMeta{APIVersion: schedv1beta1.SchemeGroupVersion.String(), Kind: "PodGroup"},
		ObjectMeta: metav1.ObjectMeta{Name: g.Name},
		Spec: schedv1beta1.PodGroupSpec{
			SchedulingPolicy:  schedv1beta1.PodGroupSchedulingPolicy{Gang: &schedv1beta1.GangSchedulingPolicy{MinCount: int32(g.minCount())}},
			PriorityClassName: g.PriorityClass,
		},
	}
	if g.TopologyKey != "" {
		pg.Spec.SchedulingConstraints = &schedv1beta1.PodGroupSchedulingConstraints{
			Topology: []schedv1beta1.TopologyConstraint{{Key: resolveKey(g.TopologyKey)}},
		}
	}
	if len(g.PreferredTopology) > 0 {
		// Upstream's API has no field for them.
		keys := make([]string, len(g.PreferredTopology))
		for i, k := range g.PreferredTopology {
			keys[i] = resolveKey(k)
		}
		pg.Annotations = map[string]string{v1alpha1.PreferredTopologyAnnotation: strings.Join(keys, ",")}
	}
	if g.DisruptionAll {
		pg.Spec.DisruptionMode = &schedv1beta1.DisruptionMode{All: &schedv1beta1.AllDisruptionMode{}}
	}
	if secs, ok := g.minRuntimeSeconds(); ok {
		if pg.Annotations == nil {
			pg.Annotations = map[string]string{}
		}
		pg.Annotations[v1alpha1.MinRuntimeAnnotation] = strconv.Itoa(int(secs))
	}
	if g.Parent != "" {
		// Upstream requires a workload reference beside a parent.
		pg.Spec.ParentCompositePodGroupName = ptr.To(g.Parent)
		pg.Spec.WorkloadRef = &schedv1beta1.WorkloadReference{WorkloadName: g.Parent, TemplateName: g.Name}
	}
	return pg
}

// podGroup is the PodGroup a gang generator makes, or nil for a label pair
// or an upstream gang.
func (g *Gang) podGroup() *v1alpha1.PodGroup {
	if g.LabelPair || g.API == APIUpstream {
		return nil
	}
	pg := &v1alpha1.PodGroup{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.SchemeGroupVersion.String(), Kind: "PodGroup"},
		ObjectMeta: metav1.ObjectMeta{Name: g.Name},
		Spec: v1alpha1.PodGroupSpec{
			SchedulingPolicy:  v1alpha1.PodGroupSchedulingPolicy{Gang: &v1alpha1.GangSchedulingPolicy{MinCount: int32(g.minCount())}},
			PriorityClassName: g.PriorityClass,
		},
	}
	if g.TopologyKey != "" || len(g.PreferredTopology) > 0 {
		c := &v1alpha1.PodGroupSchedulingConstraints{}
		if g.TopologyKey != "" {
			c.Topology = []v1alpha1.TopologyConstraint{{Key: resolveKey(g.TopologyKey)}}
		}
		for _, k := range g.PreferredTopology {
			c.PreferredTopology = append(c.PreferredTopology, v1alpha1.TopologyConstraint{Key: resolveKey(k)})
		}
		pg.Spec.SchedulingConstraints = c
	}
	if g.DisruptionAll {
		pg.Spec.DisruptionMode = &v1alpha1.DisruptionMode{All: &v1alpha1.AllDisruptionMode{}}
	}
	if g.Parent != "" {
		pg.Spec.ParentCompositePodGroupName = ptr.To(g.Parent)
	}
	if secs, ok := g.reserveAfterSeconds(); ok && g.ReserveAfter != "" {
		pg.Annotations = map[string]string{reserveAfterAnnotation: strconv.FormatInt(secs, 10)}
	}
	if secs, ok := g.minRuntimeSeconds(); ok {
		pg.Spec.MinRuntimeSeconds = ptr.To(secs)
	}
	return pg
}

// minRuntimeSeconds is MinRuntime in seconds; false when unset or invalid.
func (g *Gang) minRuntimeSeconds() (int32, bool) {
	if g.MinRuntime == "" {
		return 0, false
	}
	d, err := time.ParseDuration(g.MinRuntime)
	if err != nil || d < 0 || d > maxTimeout || d%time.Second != 0 {
		return 0, false
	}
	return int32(d / time.Second), true
}

// setRuntime makes the node agent end the pod after d.
func setRuntime(p *corev1.Pod, d time.Duration) {
	if p.Annotations == nil {
		p.Annotations = map[string]string{}
	}
	p.Annotations[runtimeAnnotation] = strconv.FormatFloat(d.Seconds(), 'f', -1, 64)
}

func (g *Gang) minCount() int {
	if g.MinCount > 0 {
		return g.MinCount
	}
	return g.Size
}

func (g *Gang) podPrefix() string {
	if g.PodPrefix != "" {
		return g.PodPrefix
	}
	return g.Name + "-"
}

// pods are the gang's members.
func (g *Gang) pods() []*corev1.Pod {
	labels := map[string]string{v1alpha1.PodGroupLabel: g.Name}
	if g.LabelPair {
		labels = map[string]string{
			v1alpha1.LightweightNameLabel:         g.Name,
			v1alpha1.LightweightMinAvailableLabel: strconv.Itoa(g.minCount()),
		}
	}
	if g.API == APIUpstream {
		labels = nil
	}
	out := make([]*corev1.Pod, g.Size)
	for i := range out {
		out[i] = newPod(fmt.Sprintf("%s%d", g.podPrefix(), i), labels, g.CPU, g.Memory, g.GPUs, g.PriorityClass)
		if g.API == APIUpstream {
			out[i].Spec.SchedulingGroup = &corev1.PodSchedulingGroup{PodGroupName: ptr.To(g.Name)}
		}
		if g.runtime > 0 {
			setRuntime(out[i], g.runtime)
		}
		claimDevices(out[i], g.ClaimTemplate, g.SharedClaim)
		if g.Ranked {
			if out[i].Annotations == nil {
				out[i].Annotations = map[string]string{}
			}
			out[i].Annotations[v1alpha1.RankAnnotation] = strconv.Itoa(i)
		}
	}
	return out
}

// pods are the set's plain pods, numbered with two digits so they sort.
func (s *PodSet) pods() []*corev1.Pod {
	out := make([]*corev1.Pod, s.Count)
	for i := range out {
		out[i] = newPod(fmt.Sprintf("%s-%02d", s.Name, i), map[string]string{PodSetLabel: s.Name}, s.CPU, s.Memory, s.GPUs, s.PriorityClass)
	}
	return out
}

// newPod is a pause pod for the Phalanx scheduler with the given requests.
func newPod(name string, labels map[string]string, cpu, memory Amount, gpus int, priorityClass string) *corev1.Pod {
	req := corev1.ResourceList{corev1.ResourceCPU: quantity(cpu, "1")}
	if memory != "" {
		req[corev1.ResourceMemory] = quantity(memory, "0")
	}
	lim := corev1.ResourceList{}
	if gpus > 0 {
		q := *resource.NewQuantity(int64(gpus), resource.DecimalSI)
		req[GPUResource] = q
		lim[GPUResource] = q
	}
	podLabels := make(map[string]string, len(labels))
	for k, v := range labels {
		podLabels[k] = v
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: podLabels},
		Spec: corev1.PodSpec{
			SchedulerName:     SchedulerName,
			PriorityClassName: priorityClass,
			Containers: []corev1.Container{{
				Name: "main", Image: pauseImage,
				Resources: corev1.ResourceRequirements{Requests: req, Limits: lim},
			}},
		},
	}
}

// quantity parses an amount Validate has already checked.
func quantity(a Amount, def string) resource.Quantity {
	if a == "" {
		a = Amount(def)
	}
	q, err := resource.ParseQuantity(string(a))
	if err != nil {
		return resource.MustParse(def)
	}
	return q
}

// nodeCapacity is a simulated node's capacity and allocatable.
func nodeCapacity(cpu, memory Amount, gpus, pods int) corev1.ResourceList {
	if pods == 0 {
		pods = 110
	}
	c := corev1.ResourceList{
		corev1.ResourceCPU:    quantity(cpu, "8"),
		corev1.ResourceMemory: quantity(memory, "64Gi"),
		corev1.ResourcePods:   *resource.NewQuantity(int64(pods), resource.DecimalSI),
	}
	if gpus > 0 {
		c[GPUResource] = *resource.NewQuantity(int64(gpus), resource.DecimalSI)
	}
	return c
}

// nodes renders the scenario's cluster with the sandbox's naming
// and labels (tools/sandbox links the API server, so it is not imported here).
func (c *ClusterSpec) nodes() []*corev1.Node {
	capacity := nodeCapacity(c.CPU, c.Memory, c.GPUs, c.Pods)
	var out []*corev1.Node
	for z := 0; z < c.Zones; z++ {
		for r := 0; r < c.Racks; r++ {
			block := ""
			if c.RacksPerBlock > 0 {
				block = fmt.Sprintf("zone-%d-block-%d", z, r/c.RacksPerBlock)
			}
			for n := 0; n < c.NodesPerRack; n++ {
				out = append(out, newNode(fmt.Sprintf("node-z%d-r%d-n%d", z, r, n),
					fmt.Sprintf("zone-%d", z), block, fmt.Sprintf("zone-%d-rack-%d", z, r), capacity))
			}
		}
	}
	return out
}

// nodes are the nodes an addNodes step creates.
func (a *AddNodes) nodes(cluster ClusterSpec) []*corev1.Node {
	cpu, memory := a.CPU, a.Memory
	if cpu == "" {
		cpu = cluster.CPU
	}
	if memory == "" {
		memory = cluster.Memory
	}
	capacity := nodeCapacity(cpu, memory, a.GPUs, cluster.Pods)
	out := make([]*corev1.Node, a.Count)
	for i := range out {
		out[i] = newNode(fmt.Sprintf("%s-%d", a.Prefix, i), a.Zone, a.Block, a.Rack, capacity)
	}
	return out
}

// newNode is a Ready, untainted node.
func newNode(name, zone, block, rack string, capacity corev1.ResourceList) *corev1.Node {
	labels := map[string]string{HostnameLabel: name}
	if zone != "" {
		labels[ZoneLabel] = zone
	}
	if block != "" {
		labels[BlockLabel] = block
	}
	if rack != "" {
		labels[RackLabel] = rack
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Status: corev1.NodeStatus{
			Capacity:    capacity.DeepCopy(),
			Allocatable: capacity.DeepCopy(),
			Phase:       corev1.NodeRunning,
			Conditions: []corev1.NodeCondition{{
				Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "SimulatedNode",
			}},
		},
	}
}
