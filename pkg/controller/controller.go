package controller

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	xversioned "sigs.k8s.io/scheduler-plugins/pkg/generated/clientset/versioned"

	"github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
	"github.com/phalanx-sched/phalanx/pkg/generated/clientset/versioned"
	phalanxinformers "github.com/phalanx-sched/phalanx/pkg/generated/informers/externalversions"
)

// Options tune the controllers. The zero value is ready for production.
type Options struct {
	// Workers is how many keys each controller reconciles at once; default 4.
	Workers int
	// StatusDelay is how long a PodGroup's counters wait after the first pod
	// change before they are written, so that a burst of pod events (a Job
	// creating 1,000 pods, a gang binding at once) becomes one status write.
	// Default 500ms; negative means no delay (tests).
	StatusDelay time.Duration
	// EventRecorder replaces the recorder that writes Events to the API
	// server, for tests.
	EventRecorder record.EventRecorder
	// SchedulerPlugins is a client for scheduler-plugins' scheduling.x-k8s.io
	// PodGroups. With it, their status (phase and counters) is kept while
	// the API server serves their CRD; without it, they are left alone.
	SchedulerPlugins xversioned.Interface
	// Provisioning, when set, asks a cluster autoscaler for the nodes of
	// opted-in gangs through ProvisioningRequests; nil leaves it off.
	Provisioning *ProvisioningOptions
}

const (
	defaultWorkers     = 4
	defaultStatusDelay = 500 * time.Millisecond
)

// Controllers runs the Workload controller, the Job integration and the
// PodGroup status controller over one set of shared informers.
type Controllers struct {
	kubeInformers    informers.SharedInformerFactory
	phalanxInformers phalanxinformers.SharedInformerFactory
	broadcaster      record.EventBroadcaster
	kube             kubernetes.Interface
	workers          int

	workloads *workloadController
	jobs      *jobController
	status    *statusController
	// xstatus keeps scheduler-plugins' PodGroup status; nil without a
	// client for them.
	xstatus *xStatusController
	// provisioning keeps opted-in gangs' ProvisioningRequests; nil when
	// off.
	provisioning *provisioningController

	synced []cache.InformerSynced
}

// New wires the controllers to their informers. Nothing runs until Start.
func New(kube kubernetes.Interface, phalanx versioned.Interface, opts Options) (*Controllers, error) {
	RegisterMetrics()
	if opts.Workers <= 0 {
		opts.Workers = defaultWorkers
	}
	switch {
	case opts.StatusDelay == 0:
		opts.StatusDelay = defaultStatusDelay
	case opts.StatusDelay < 0:
		opts.StatusDelay = 0
	}

	c := &Controllers{
		kubeInformers:    informers.NewSharedInformerFactory(kube, 0),
		phalanxInformers: phalanxinformers.NewSharedInformerFactory(phalanx, 0),
		kube:             kube,
		workers:          opts.Workers,
	}
	recorder := opts.EventRecorder
	if recorder == nil {
		scheme, err := eventScheme()
		if err != nil {
			return nil, err
		}
		c.broadcaster = record.NewBroadcaster()
		recorder = c.broadcaster.NewRecorder(scheme, corev1.EventSource{Component: v1alpha1.ControllerName})
	}

	pods := c.kubeInformers.Core().V1().Pods().Informer()
	if err := pods.AddIndexers(cache.Indexers{
		podsByJobIndex:       indexPodsByJob,
		podsByPodGroupIndex:  indexPodsByPodGroup,
		podsByXPodGroupIndex: indexPodsByXPodGroup,
	}); err != nil {
		return nil, fmt.Errorf("add pod indexers: %w", err)
	}
	jobs := c.kubeInformers.Batch().V1().Jobs()
	sched := c.phalanxInformers.Scheduling().V1alpha1()

	var err error
	if c.workloads, err = newWorkloadController(phalanx, sched.Workloads(), sched.PodGroups(), sched.CompositePodGroups(), recorder); err != nil {
		return nil, err
	}
	if c.jobs, err = newJobController(kube, phalanx, jobs, sched.Workloads(), sched.PodGroups(), pods, recorder); err != nil {
		return nil, err
	}
	if c.status, err = newStatusController(phalanx, sched.PodGroups(), pods, opts.StatusDelay); err != nil {
		return nil, err
	}
	if opts.SchedulerPlugins != nil {
		if c.xstatus, err = newXStatusController(opts.SchedulerPlugins, kube.Discovery(), pods, opts.StatusDelay, opts.Workers); err != nil {
			return nil, err
		}
	}
	if opts.Provisioning != nil {
		if c.provisioning, err = newProvisioningController(kube, phalanx, sched.PodGroups(), sched.Workloads(), jobs, pods, recorder, *opts.Provisioning); err != nil {
			return nil, err
		}
	}
	c.synced = []cache.InformerSynced{
		pods.HasSynced,
		jobs.Informer().HasSynced,
		sched.Workloads().Informer().HasSynced,
		sched.PodGroups().Informer().HasSynced,
		sched.CompositePodGroups().Informer().HasSynced,
	}
	return c, nil
}

// Start starts the informers, waits until they have synced and starts the
// workers. It returns once the controllers are running; they stop when ctx
// is cancelled.
func (c *Controllers) Start(ctx context.Context) error {
	if c.broadcaster != nil {
		c.broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: c.kube.CoreV1().Events("")})
		go func() {
			<-ctx.Done()
			c.broadcaster.Shutdown()
		}()
	}
	c.kubeInformers.Start(ctx.Done())
	c.phalanxInformers.Start(ctx.Done())
	if !cache.WaitForNamedCacheSyncWithContext(ctx, c.synced...) {
		return errors.New("phalanx controllers: informer caches did not sync before the context ended")
	}
	for _, l := range []*loop{&c.workloads.loop, &c.jobs.jobLoop, &c.jobs.podLoop, &c.status.loop} {
		l.start(ctx, c.workers)
	}
	if c.xstatus != nil {
		c.xstatus.start(ctx)
	}
	if c.provisioning != nil {
		if err := c.provisioning.start(ctx, c.workers); err != nil {
			return err
		}
	}
	go func() {
		<-ctx.Done()
		c.kubeInformers.Shutdown()
		c.phalanxInformers.Shutdown()
	}()
	return nil
}

// HasSynced reports whether every informer has completed its first list.
func (c *Controllers) HasSynced() bool {
	for _, s := range c.synced {
		if !s() {
			return false
		}
	}
	return true
}

// eventScheme knows the built-in kinds and ours, so Events can reference a
// Workload as well as a Job.
func eventScheme() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		return nil, err
	}
	if err := v1alpha1.AddToScheme(s); err != nil {
		return nil, err
	}
	return s, nil
}
