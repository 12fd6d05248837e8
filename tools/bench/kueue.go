package bench

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	kueueclient "sigs.k8s.io/kueue/client-go/clientset/versioned"
	kueueconstants "sigs.k8s.io/kueue/pkg/controller/constants"

	"github.com/phalanx-sched/phalanx/tools/bench/report"
	"github.com/phalanx-sched/phalanx/tools/sandbox"
)

// The kueue-tas arm runs Kueue's own manager (tools/cmd/phalanx-kueue,
// Kueue v0.17.0) with its topology-aware scheduling on, in front of
// upstream kube-scheduler v1.37.2. Kueue decides where each gang goes when
// it admits it: its TAS writes every pod's node into a node selector, and
// kube-scheduler only binds the pods there. So the arm measures Kueue's
// placement, on the same nodes and the same stream of gangs as Phalanx.
//
// Each gang is an Indexed batch/v1 Job (parallelism = completions = the
// gang's size, the case's pod), queued in one LocalQueue whose
// ClusterQueue has quota for the whole case on one ResourceFlavor, whose
// Topology has the case's levels. The upstream Job controller creates the
// pods once Kueue unsuspends a Job, so the window includes what a user of
// Kueue waits for: admission, pod creation, Kueue's ungating, the binds.
const (
	kueueQueue    = "bench"
	kueueCQ       = "bench"
	kueueFlavor   = "bench-tas"
	kueueTopology = "bench"
)

// kueueTASUnsupported says why the kueue-tas arm does not run c, "" when
// it does: it runs the preferred-topology stream's four variants, which
// read Kueue's TAS against Phalanx's preferred levels.
func kueueTASUnsupported(c Case) string {
	if c.preferredStream() {
		return ""
	}
	return "the kueue-tas arm runs the preferred-topology stream only (TopologyAwareScheduling/*_PreferredRack_RequiredBlock and its twins)"
}

// kueueTopologyLevels are the Topology's levels, widest first, as the case
// labels its nodes; Kueue requires the hostname last.
func kueueTopologyLevels(c Case) []string {
	levels := []string{sandbox.ZoneLabel}
	if c.RacksPerBlock > 0 {
		levels = append(levels, sandbox.BlockLabel)
	}
	return append(levels, sandbox.RackLabel, sandbox.HostnameLabel)
}

// kueueTopologyRequest is the pod-template annotation that asks Kueue for
// the case's constraint. Kueue takes one of required, preferred and
// unconstrained per pod set (its webhook refuses two), so a preferred
// level inside a required one keeps only the preferred level: Kueue then
// climbs from it through every wider level (the required one included)
// and, when no single domain of the widest holds the gang, spreads it.
// Without a constraint the request is unconstrained, which Kueue places
// by least free capacity rather than best fit.
func kueueTopologyRequest(c Case) (key, value string) {
	switch {
	case len(c.PreferredTopology) > 0:
		return kueue.PodSetPreferredTopologyAnnotation, c.PreferredTopology[0]
	case c.TopologyKey != "":
		return kueue.PodSetRequiredTopologyAnnotation, c.TopologyKey
	default:
		return kueue.PodSetUnconstrainedTopologyAnnotation, "true"
	}
}

// kueuePriorityClass names a gang's WorkloadPriorityClass.
func kueuePriorityClass(gang string) string { return "bench-" + gang }

// setUpKueue creates the arm's Kueue objects: the Topology, the flavor on
// the case's nodes, the ClusterQueue (held, so that nothing is admitted
// before the window starts) and LocalQueue, and one WorkloadPriorityClass
// per gang.
//
// The priorities keep the stream's order. Kueue orders a queue by
// priority, then by the Workload's creation time in whole seconds, then by
// UID, so gangs created within one second would be admitted in a random
// order, and on a cluster that fills up the order decides the placement.
// Each gang gets a priority below the one before; the ClusterQueue never
// preempts, so the priorities do nothing else.
func setUpKueue(ctx context.Context, k kueueclient.Interface, c Case, ns string) error {
	if k == nil {
		return fmt.Errorf("the sandbox runs no Kueue")
	}
	api := k.KueueV1beta2()
	topo := &kueue.Topology{ObjectMeta: metav1.ObjectMeta{Name: kueueTopology}}
	for _, l := range kueueTopologyLevels(c) {
		topo.Spec.Levels = append(topo.Spec.Levels, kueue.TopologyLevel{NodeLabel: l})
	}
	if _, err := api.Topologies().Create(ctx, topo, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create Kueue Topology: %w", err)
	}
	flavor := &kueue.ResourceFlavor{
		ObjectMeta: metav1.ObjectMeta{Name: kueueFlavor},
		Spec: kueue.ResourceFlavorSpec{
			NodeLabels:   map[string]string{benchPoolLabel: benchPool},
			TopologyName: ptr.To(kueue.TopologyReference(kueueTopology)),
		},
	}
	if _, err := api.ResourceFlavors().Create(ctx, flavor, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create Kueue ResourceFlavor: %w", err)
	}
	// Quota for every pod of the case at once: Kueue's quota never holds a
	// gang back, only its topology does.
	var quotas []kueue.ResourceQuota
	for name, q := range c.podRequests() {
		total := q.DeepCopy()
		total.Mul(int64(c.PodCount()))
		quotas = append(quotas, kueue.ResourceQuota{Name: name, NominalQuota: total})
	}
	covered := make([]corev1.ResourceName, len(quotas))
	for i, q := range quotas {
		covered[i] = q.Name
	}
	cq := &kueue.ClusterQueue{
		ObjectMeta: metav1.ObjectMeta{Name: kueueCQ},
		Spec: kueue.ClusterQueueSpec{
			NamespaceSelector: &metav1.LabelSelector{},
			ResourceGroups: []kueue.ResourceGroup{{
				CoveredResources: covered,
				Flavors:          []kueue.FlavorQuotas{{Name: kueueFlavor, Resources: quotas}},
			}},
			StopPolicy: ptr.To(kueue.Hold),
		},
	}
	if _, err := api.ClusterQueues().Create(ctx, cq, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create Kueue ClusterQueue: %w", err)
	}
	lq := &kueue.LocalQueue{
		ObjectMeta: metav1.ObjectMeta{Name: kueueQueue},
		Spec:       kueue.LocalQueueSpec{ClusterQueue: kueueCQ},
	}
	if _, err := api.LocalQueues(ns).Create(ctx, lq, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create Kueue LocalQueue: %w", err)
	}
	gangs := c.measuredGangs()
	return parallel(createWorkers, len(gangs), func(g int) error {
		pc := &kueue.WorkloadPriorityClass{
			ObjectMeta: metav1.ObjectMeta{Name: kueuePriorityClass(gangs[g].name)},
			Value:      int32(len(gangs) - g),
		}
		if _, err := api.WorkloadPriorityClasses().Create(ctx, pc, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create Kueue WorkloadPriorityClass: %w", err)
		}
		return nil
	})
}

// releaseKueue lets the held ClusterQueue admit: the start of the arm.
func releaseKueue(ctx context.Context, k kueueclient.Interface) error {
	patch := fmt.Sprintf(`{"spec":{"stopPolicy":%q}}`, kueue.None)
	if _, err := k.KueueV1beta2().ClusterQueues().Patch(ctx, kueueCQ, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("release the Kueue ClusterQueue: %w", err)
	}
	return nil
}

// waitForKueueWorkloads waits until Kueue has made a Workload of each of
// the n Jobs, so that a precreated window starts with every gang queued,
// as the other arms' start with every pod created.
func waitForKueueWorkloads(ctx context.Context, k kueueclient.Interface, ns string, n int) error {
	var have int
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		list, err := k.KueueV1beta2().Workloads(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		have = len(list.Items)
		return have >= n, nil
	})
	if err != nil {
		return fmt.Errorf("kueue made %d of %d Workloads: %w", have, n, err)
	}
	return nil
}

// kueueJob is one gang as a Job for Kueue: Indexed, so that member i is
// the pod of completion index i, with the case's pod as its template and
// the case's topology request.
func kueueJob(c Case, sp gangSpec) *batchv1.Job {
	size := int32(sp.size)
	pod := benchPod(c, sp.name, sp.name, ArmKueueTAS, "")
	pod.Spec.RestartPolicy = corev1.RestartPolicyNever
	key, value := kueueTopologyRequest(c)
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{
			Name: sp.name,
			Labels: map[string]string{
				kueueconstants.QueueLabel:                 kueueQueue,
				kueueconstants.WorkloadPriorityClassLabel: kueuePriorityClass(sp.name),
			},
		},
		Spec: batchv1.JobSpec{
			Parallelism:    &size,
			Completions:    &size,
			CompletionMode: ptr.To(batchv1.IndexedCompletion),
			// Kueue's webhook suspends a queued Job anyway; saying so keeps
			// the Job controller from creating pods in between.
			Suspend: ptr.To(true),
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: pod.Labels, Annotations: map[string]string{key: value}},
				Spec:       pod.Spec,
			},
		},
	}
}

// kueueMemberName is the case's name of a Job's pod: <gang>-<index>, the
// name the other arms give the same member. Other pods keep theirs.
func kueueMemberName(p *corev1.Pod) string {
	job, index := p.Labels[batchv1.JobNameLabel], p.Labels[batchv1.JobCompletionIndexAnnotation]
	if job == "" || index == "" {
		return p.Name
	}
	return job + "-" + index
}

// memberName is how the arm's pods map to the case's members: by name,
// except under kueue-tas, whose pods the Job controller names.
func memberName(arm Arm) func(*corev1.Pod) string {
	if arm == ArmKueueTAS {
		return kueueMemberName
	}
	return func(p *corev1.Pod) string { return p.Name }
}

// kueueArm is kube-scheduler as a child arm, with Kueue's manager (the
// sandbox's child) measured beside it as the arm's controller: its CPU
// over the window and its peak memory within it.
type kueueArm struct {
	*childArm
	pid  int
	cpu0 time.Duration
}

// newKueueArm starts measuring Kueue's process pid at the window's start.
func newKueueArm(a *childArm, pid int) *kueueArm {
	k := &kueueArm{childArm: a, pid: pid}
	k.startWindow()
	return k
}

func (a *kueueArm) startWindow() {
	a.cpu0 = processCPUOf(a.pid)
	// Kueue's peak before the window is its start-up (CRDs, caches):
	// restart its high-water mark, as the harness does for its own.
	_ = os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", a.pid), []byte("5"), 0)
}

func (a *kueueArm) markWindow(ctx context.Context) error {
	a.startWindow()
	return a.childArm.markWindow(ctx)
}

func (a *kueueArm) measure(ctx context.Context, res *report.Result, bound int) {
	a.childArm.measure(ctx, res, bound)
	res.ControllerCPUSeconds = (processCPUOf(a.pid) - a.cpu0).Seconds()
	res.ControllerPeakRSSBytes = peakRSS(strconv.Itoa(a.pid))
}
