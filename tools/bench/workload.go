package bench

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	spv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	v1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
	"github.com/phalanx-sched/phalanx/tools/sandbox"
)

// Scheduler names the arms' pods ask for.
const (
	// phalanxSchedulerName is the profile of config/second-scheduler.yaml.
	phalanxSchedulerName  = "phalanx-scheduler"
	upstreamSchedulerName = corev1.DefaultSchedulerName
	// ceilingSchedulerName is served by no scheduler: only the bind-ceiling
	// binder touches these pods.
	ceilingSchedulerName = "bench-bind-ceiling"
)

// GangLabel names a gang member's gang on every arm's pods of an
// AntiAffinity case. The pod-group label is Phalanx's and upstream's pods
// have none, so the anti-affinity selector needs a label both arms carry.
const GangLabel = "bench.phalanx.dev/gang"

// createWorkers bounds concurrent creates while setting up a precreated
// case; liveCreateWorkers is the live arrival's: a few clients, each
// creating one gang's group and then its members one after another.
const (
	createWorkers     = 32
	liveCreateWorkers = 4
)

// gangSpec is one gang (or, with name "", one plain pod) to create.
type gangSpec struct {
	name     string
	size     int
	priority string // PriorityClass name, "" for none
	// first is the index of its first pod in the case's pod order.
	first int
	pods  []string
}

// measuredGangs is the case's measured gangs (or plain pods, one spec
// each) in creation order.
func (c Case) measuredGangs() []gangSpec {
	names, gangs := c.podNames()
	prio := ""
	if c.Preemption != nil {
		prio = highPriorityClass
	}
	var out []gangSpec
	for i, n := range names {
		if gangs[i] != "" && len(out) > 0 && out[len(out)-1].name == gangs[i] {
			last := &out[len(out)-1]
			last.pods = append(last.pods, n)
			last.size++
			continue
		}
		out = append(out, gangSpec{name: gangs[i], size: 1, priority: prio, first: i, pods: []string{n}})
	}
	return out
}

// fillerGangs is a preemption case's low-priority gangs.
func (c Case) fillerGangs() []gangSpec {
	var out []gangSpec
	for _, g := range c.lowGroups() {
		out = append(out, gangSpec{name: g.Name, size: len(g.Members), priority: lowPriorityClass, pods: g.Members})
	}
	return out
}

// createWorkload creates the case's measured groups and pods in ns before
// the scheduler starts, in the form the arm understands: Phalanx CRD
// PodGroups and the pod-group label (or, in DialectNative, the upstream
// arm's objects), scheduling.k8s.io/v1beta1 PodGroups and
// spec.schedulingGroup for upstream, scheduling.x-k8s.io PodGroups and
// their label for scheduler-plugins, bare pods for the binder, a Job per
// gang for Kueue (whose pods the Job controller creates).
func createWorkload(ctx context.Context, cl *benchCluster, ns string, c Case, arm Arm) error {
	specs := c.measuredGangs()
	err := parallel(createWorkers, len(specs), func(g int) error {
		if specs[g].name == "" {
			return nil
		}
		return createGroup(ctx, cl, ns, c, arm, specs[g], false)
	})
	if err != nil {
		return err
	}
	names, gangs := c.podNames()
	return parallel(createWorkers, len(names), func(i int) error {
		return createPod(ctx, cl, ns, c, arm, names[i], gangs[i], "")
	})
}

// createLive creates gangs while the scheduler runs: liveCreateWorkers
// goroutines take whole gangs in order; each creates the gang's group, then
// its members one after another, and calls created(i) with the pod's index
// in specs order after each pod. It returns when all are created or on the
// first error.
func createLive(ctx context.Context, cl *benchCluster, ns string, c Case, arm Arm, specs []gangSpec, lowPriority bool, created func(i int)) error {
	return parallel(liveCreateWorkers, len(specs), func(g int) error {
		sp := specs[g]
		if sp.name != "" {
			if err := createGroup(ctx, cl, ns, c, arm, sp, lowPriority); err != nil {
				return err
			}
		}
		for k, name := range sp.pods {
			if err := createPod(ctx, cl, ns, c, arm, name, sp.name, sp.priority); err != nil {
				return err
			}
			if created != nil {
				created(sp.first + k)
			}
		}
		return nil
	})
}

func createPod(ctx context.Context, cl *benchCluster, ns string, c Case, arm Arm, name, gang, priorityClass string) error {
	if arm == ArmKueueTAS {
		// The Job controller creates the pods of the gang's Job.
		return nil
	}
	p := benchPod(c, name, gang, arm, priorityClass)
	if _, err := cl.Client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create pod %s: %w", p.Name, err)
	}
	return nil
}

// createPriorityClasses creates the preemption cases' PriorityClasses.
func createPriorityClasses(ctx context.Context, cl *sandbox.Cluster) error {
	for name, value := range map[string]int32{lowPriorityClass: lowPriority, highPriorityClass: highPriority} {
		pc := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Value: value}
		if _, err := cl.Client.SchedulingV1().PriorityClasses().Create(ctx, pc, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create PriorityClass %s: %w", name, err)
		}
	}
	return nil
}

// parallel calls fn(0..n-1) in order on workers goroutines and returns
// the first error; after an error it starts no more calls.
func parallel(workers, n int, fn func(i int) error) error {
	work := make(chan int)
	errs := make(chan error, 1)
	var failed atomic.Bool
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				if failed.Load() {
					continue
				}
				if err := fn(i); err != nil {
					failed.Store(true)
					select {
					case errs <- err:
					default:
					}
				}
			}
		}()
	}
	for i := 0; i < n; i++ {
		work <- i
	}
	close(work)
	wg.Wait()
	close(errs)
	return <-errs
}

// createGroup creates one gang's group. Filler (low) gangs of a
// preemption case have disruptionMode all: a victim gang goes whole.
func createGroup(ctx context.Context, cl *benchCluster, ns string, c Case, arm Arm, sp gangSpec, low bool) error {
	name, size, topologyKey := sp.name, int32(sp.size), c.TopologyKey
	if low {
		topologyKey = ""
	}
	var err error
	switch arm {
	case ArmPhalanx, ArmPhalanxProcess:
		if c.dialect == DialectNative {
			return createNativeGroup(ctx, cl.Cluster, ns, arm, name, size, topologyKey, sp.priority, low)
		}
		_, err = cl.Phalanx.SchedulingV1alpha1().PodGroups(ns).Create(ctx, phalanxPodGroup(c, sp, low), metav1.CreateOptions{})
	case ArmUpstream:
		return createNativeGroup(ctx, cl.Cluster, ns, arm, name, size, topologyKey, sp.priority, low)
	case ArmSchedulerPlugins:
		// Low gangs too: scheduler-plugins has no disruption mode, and
		// schedulerPluginsUnsupported keeps topology cases away.
		_, err = cl.schedulerPlugins.SchedulingV1alpha1().PodGroups(ns).Create(ctx, schedulerPluginsPodGroup(name, size), metav1.CreateOptions{})
	case ArmCeiling:
		// The binder keeps the gangs in its own assignment.
		return nil
	case ArmKueueTAS:
		// The gang is a Job: Kueue's unit of admission.
		if _, err := cl.Client.BatchV1().Jobs(ns).Create(ctx, kueueJob(c, sp), metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create Job %s: %w", name, err)
		}
		return nil
	default:
		return fmt.Errorf("unknown arm %q", arm)
	}
	if err != nil {
		return fmt.Errorf("create %s PodGroup %s: %w", arm, name, err)
	}
	return nil
}

// createNativeGroup creates one gang's scheduling.k8s.io/v1beta1 PodGroup:
// the upstream arm's groups, and the Phalanx arms' in DialectNative.
func createNativeGroup(ctx context.Context, cl *sandbox.Cluster, ns string, arm Arm, name string, size int32, topologyKey, priorityClass string, low bool) error {
	pg := &schedulingv1beta1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: schedulingv1beta1.PodGroupSpec{
			SchedulingPolicy: schedulingv1beta1.PodGroupSchedulingPolicy{
				Gang: &schedulingv1beta1.GangSchedulingPolicy{MinCount: size},
			},
			PriorityClassName: priorityClass,
		},
	}
	if low {
		pg.Spec.DisruptionMode = &schedulingv1beta1.DisruptionMode{All: &schedulingv1beta1.AllDisruptionMode{}}
	}
	if topologyKey != "" {
		pg.Spec.SchedulingConstraints = &schedulingv1beta1.PodGroupSchedulingConstraints{
			Topology: []schedulingv1beta1.TopologyConstraint{{Key: topologyKey}},
		}
	}
	if _, err := cl.Client.SchedulingV1beta1().PodGroups(ns).Create(ctx, pg, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create %s PodGroup %s: %w", arm, name, err)
	}
	return nil
}

// phalanxPodGroup is one gang's group on Phalanx's arms.
func phalanxPodGroup(c Case, sp gangSpec, low bool) *v1alpha1.PodGroup {
	pg := &v1alpha1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Name: sp.name},
		Spec: v1alpha1.PodGroupSpec{
			SchedulingPolicy: v1alpha1.PodGroupSchedulingPolicy{
				Gang: &v1alpha1.GangSchedulingPolicy{MinCount: int32(sp.size)},
			},
			PriorityClassName: sp.priority,
		},
	}
	if low {
		pg.Spec.DisruptionMode = &v1alpha1.DisruptionMode{All: &v1alpha1.AllDisruptionMode{}}
		return pg
	}
	if c.TopologyKey == "" && len(c.PreferredTopology) == 0 {
		return pg
	}
	sc := &v1alpha1.PodGroupSchedulingConstraints{}
	if c.TopologyKey != "" {
		sc.Topology = []v1alpha1.TopologyConstraint{{Key: c.TopologyKey}}
	}
	for _, k := range c.PreferredTopology {
		sc.PreferredTopology = append(sc.PreferredTopology, v1alpha1.TopologyConstraint{Key: k})
	}
	pg.Spec.SchedulingConstraints = sc
	return pg
}

// benchPod is upstream's gang-pod template: one pause container asking for
// 100m cpu (or the case's PodCPU) and 100Mi memory, attached to its gang
// the arm's way; in an AntiAffinity case, with the same GangLabel and
// anti-affinity term on every arm.
func benchPod(c Case, name, gang string, arm Arm, priorityClass string) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{
				Name:      "pause",
				Image:     podImage,
				Resources: corev1.ResourceRequirements{Requests: c.podRequests()},
			}},
			PriorityClassName: priorityClass,
		},
	}
	c.addGPUs(p)
	if c.Ranked && gang != "" {
		// Members are named <gang>-<i>, i their rank.
		if i := strings.LastIndexByte(name, '-'); i >= 0 {
			p.Annotations = map[string]string{v1alpha1.RankAnnotation: name[i+1:]}
		}
	}
	if c.AntiAffinity && gang != "" {
		p.Labels = map[string]string{GangLabel: gang}
		p.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
				LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{GangLabel: gang}},
				TopologyKey:   sandbox.HostnameLabel,
			}},
		}}
	}
	switch arm {
	case ArmPhalanx, ArmPhalanxProcess:
		p.Spec.SchedulerName = phalanxSchedulerName
		if gang != "" && c.dialect == DialectNative {
			g := gang
			p.Spec.SchedulingGroup = &corev1.PodSchedulingGroup{PodGroupName: &g}
		} else if gang != "" {
			if p.Labels == nil {
				p.Labels = map[string]string{}
			}
			p.Labels[v1alpha1.PodGroupLabel] = gang
		}
	case ArmUpstream:
		p.Spec.SchedulerName = upstreamSchedulerName
		if gang != "" {
			g := gang
			p.Spec.SchedulingGroup = &corev1.PodSchedulingGroup{PodGroupName: &g}
		}
	case ArmKueueTAS:
		// Kueue chooses the node; kube-scheduler binds there, pod by pod.
		p.Spec.SchedulerName = upstreamSchedulerName
	case ArmSchedulerPlugins:
		p.Spec.SchedulerName = schedulerPluginsSchedulerName
		if gang != "" {
			if p.Labels == nil {
				p.Labels = map[string]string{}
			}
			p.Labels[spv1alpha1.PodGroupLabel] = gang
		}
	default:
		p.Spec.SchedulerName = ceilingSchedulerName
	}
	return p
}
