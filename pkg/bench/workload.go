package bench

import (
	"context"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
	"github.com/phalanx-sched/phalanx/pkg/sandbox"
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

// createWorkers bounds concurrent creates while setting up a case.
const createWorkers = 32

// createWorkload creates the case's groups and pods in ns in the form the
// arm understands: Phalanx CRD PodGroups and the pod-group label,
// scheduling.k8s.io/v1beta1 PodGroups and spec.schedulingGroup for
// upstream, bare pods for the binder.
func createWorkload(ctx context.Context, cl *sandbox.Cluster, ns string, c Case, arm Arm) error {
	err := parallel(c.Gangs, func(g int) error {
		return createGroup(ctx, cl, ns, c, arm, gangName(g))
	})
	if err != nil {
		return err
	}
	names, gangs := c.podNames()
	return parallel(len(names), func(i int) error {
		p := benchPod(names[i], gangs[i], arm)
		if _, err := cl.Client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create pod %s: %w", p.Name, err)
		}
		return nil
	})
}

// parallel calls fn(0..n-1) on createWorkers goroutines and returns the
// first error.
func parallel(n int, fn func(i int) error) error {
	work := make(chan int)
	errs := make(chan error, 1)
	var wg sync.WaitGroup
	for w := 0; w < createWorkers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				if err := fn(i); err != nil {
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

func createGroup(ctx context.Context, cl *sandbox.Cluster, ns string, c Case, arm Arm, name string) error {
	var err error
	switch arm {
	case ArmPhalanx, ArmPhalanxProcess:
		pg := &v1alpha1.PodGroup{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: v1alpha1.PodGroupSpec{
				SchedulingPolicy: v1alpha1.PodGroupSchedulingPolicy{
					Gang: &v1alpha1.GangSchedulingPolicy{MinCount: int32(c.PodsPerGang)},
				},
			},
		}
		if c.TopologyKey != "" {
			pg.Spec.SchedulingConstraints = &v1alpha1.PodGroupSchedulingConstraints{
				Topology: []v1alpha1.TopologyConstraint{{Key: c.TopologyKey}},
			}
		}
		_, err = cl.Phalanx.SchedulingV1alpha1().PodGroups(ns).Create(ctx, pg, metav1.CreateOptions{})
	case ArmUpstream:
		pg := &schedulingv1beta1.PodGroup{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: schedulingv1beta1.PodGroupSpec{
				SchedulingPolicy: schedulingv1beta1.PodGroupSchedulingPolicy{
					Gang: &schedulingv1beta1.GangSchedulingPolicy{MinCount: int32(c.PodsPerGang)},
				},
			},
		}
		if c.TopologyKey != "" {
			pg.Spec.SchedulingConstraints = &schedulingv1beta1.PodGroupSchedulingConstraints{
				Topology: []schedulingv1beta1.TopologyConstraint{{Key: c.TopologyKey}},
			}
		}
		_, err = cl.Client.SchedulingV1beta1().PodGroups(ns).Create(ctx, pg, metav1.CreateOptions{})
	case ArmCeiling:
		// The binder keeps the gangs in its own assignment.
		return nil
	default:
		return fmt.Errorf("unknown arm %q", arm)
	}
	if err != nil {
		return fmt.Errorf("create %s PodGroup %s: %w", arm, name, err)
	}
	return nil
}

// benchPod is upstream's gang-pod template: one pause container asking for
// 100m cpu and 100Mi memory, attached to its gang the arm's way.
func benchPod(name, gang string, arm Arm) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{
				Name:  "pause",
				Image: podImage,
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
					corev1.ResourceCPU:    resource.MustParse(podCPU),
					corev1.ResourceMemory: resource.MustParse(podMemory),
				}},
			}},
		},
	}
	switch arm {
	case ArmPhalanx, ArmPhalanxProcess:
		p.Spec.SchedulerName = phalanxSchedulerName
		if gang != "" {
			p.Labels = map[string]string{v1alpha1.PodGroupLabel: gang}
		}
	case ArmUpstream:
		p.Spec.SchedulerName = upstreamSchedulerName
		if gang != "" {
			g := gang
			p.Spec.SchedulingGroup = &corev1.PodSchedulingGroup{PodGroupName: &g}
		}
	default:
		p.Spec.SchedulerName = ceilingSchedulerName
	}
	return p
}
