package sandbox

import (
	"context"
	"fmt"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	schedinformers "k8s.io/client-go/informers/scheduling/v1beta1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	restclient "k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/controller/garbagecollector"
	"k8s.io/kubernetes/pkg/controller/job"
	"k8s.io/kubernetes/pkg/controller/resourceclaim"
	xversioned "sigs.k8s.io/scheduler-plugins/pkg/generated/clientset/versioned"

	"github.com/phalanx-sched/phalanx/pkg/controller"
)

// controllerStopTimeout bounds how long Stop waits for the in-process
// controllers to wind down before it stops the API server under them.
const controllerStopTimeout = 30 * time.Second

// gcResyncPeriod is how often the garbage collector looks for new resource
// types (CRDs installed later) and refreshes its REST mapper.
const gcResyncPeriod = 5 * time.Second

// startControllers runs in this process what phalanx-controller and the
// parts of kube-controller-manager that Phalanx relies on would run: the
// Phalanx controllers, upstream's Job controller (which creates a Job's
// pods) and the garbage collector (which deletes a Workload's groups with
// it, and a Job's Workload with the Job). It returns once the Phalanx
// controllers' caches have synced.
func (c *Cluster) startControllers(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	c.stops = append(c.stops, func() {
		cancel()
		done := make(chan struct{})
		go func() {
			wg.Wait()
			close(done)
		}()
		select {
		case <-done:
		case <-time.After(controllerStopTimeout):
			klog.FromContext(ctx).Info("Sandbox controllers did not stop in time; stopping the API server anyway")
		}
	})

	x, err := xversioned.NewForConfig(c.crdConfigFor("phalanx-controller"))
	if err != nil {
		return err
	}
	opts := controller.Options{SchedulerPlugins: x}
	if c.opts.Provisioning != nil {
		p := *c.opts.Provisioning
		if p.Client == nil {
			if p.Client, err = dynamic.NewForConfig(c.crdConfigFor("phalanx-controller")); err != nil {
				return err
			}
		}
		opts.Provisioning = &p
	}
	phalanx, err := controller.New(c.clientFor("phalanx-controller"), c.Phalanx, opts)
	if err != nil {
		return fmt.Errorf("create phalanx controllers: %w", err)
	}
	if err := phalanx.Start(ctx); err != nil {
		return err
	}

	jobClient := c.clientFor("job-controller")
	factory := informers.NewSharedInformerFactory(jobClient, 0)
	// Workload and PodGroup informers only under WorkloadWithJob
	// (Options.JobWorkloads); without it the Job controller leaves
	// scheduling objects to Phalanx's own Job integration.
	var workloads schedinformers.WorkloadInformer
	var podGroups schedinformers.PodGroupInformer
	if c.opts.JobWorkloads {
		workloads, podGroups = factory.Scheduling().V1beta1().Workloads(), factory.Scheduling().V1beta1().PodGroups()
	}
	jobs, err := job.NewController(ctx, jobClient, factory.Core().V1().Pods(), factory.Batch().V1().Jobs(), workloads, podGroups)
	if err != nil {
		return fmt.Errorf("create job controller: %w", err)
	}
	claims, err := c.newClaimController(ctx, factory)
	if err != nil {
		return err
	}
	factory.Start(ctx.Done())
	wg.Go(func() { jobs.Run(ctx, 4) })
	wg.Go(func() { claims.Run(ctx, 4) })
	wg.Go(func() {
		<-ctx.Done()
		factory.Shutdown()
	})

	return c.startGarbageCollector(ctx, &wg)
}

// newClaimController is upstream's resourceclaim controller on factory's
// informers: it makes a pod's claims from its ResourceClaimTemplates (and
// a PodGroup's, under the upstream workload API) and frees claims whose
// pods are gone, as kube-controller-manager does.
func (c *Cluster) newClaimController(ctx context.Context, factory informers.SharedInformerFactory) (*resourceclaim.Controller, error) {
	var claimGroups schedinformers.PodGroupInformer
	if !c.opts.NoUpstreamWorkloadAPI {
		claimGroups = factory.Scheduling().V1beta1().PodGroups()
	}
	claims, err := resourceclaim.NewController(klog.FromContext(ctx), c.clientFor("resource-claim-controller"), factory.Core().V1().Pods(), claimGroups,
		factory.Resource().V1().ResourceClaims(), factory.Resource().V1().ResourceClaimTemplates())
	if err != nil {
		return nil, fmt.Errorf("create resourceclaim controller: %w", err)
	}
	return claims, nil
}

// startClaimController runs upstream's resourceclaim controller alone
// (Options.ClaimController): what a benchmark of DRA needs from
// kube-controller-manager, without the Phalanx controllers' own writes.
func (c *Cluster) startClaimController(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	c.stops = append(c.stops, func() {
		cancel()
		select {
		case <-done:
		case <-time.After(controllerStopTimeout):
			klog.FromContext(ctx).Info("The resourceclaim controller did not stop in time; stopping the API server anyway")
		}
	})
	factory := informers.NewSharedInformerFactory(c.clientFor("resource-claim-controller"), 0)
	claims, err := c.newClaimController(ctx, factory)
	if err != nil {
		close(done)
		return err
	}
	factory.Start(ctx.Done())
	go func() {
		defer close(done)
		claims.Run(ctx, 4)
		factory.Shutdown()
	}()
	return nil
}

// startGarbageCollector watches the metadata of every resource type, CRDs
// included, and deletes dependents whose owners are gone.
func (c *Cluster) startGarbageCollector(ctx context.Context, wg *sync.WaitGroup) error {
	cfg := restclient.AddUserAgent(restclient.CopyConfig(c.Config), "garbage-collector")
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	metadataClient, err := metadata.NewForConfig(cfg)
	if err != nil {
		return err
	}
	// The mapper's discovery client is its own: Sync resets the mapper when
	// it finds new resources, which must not reset the client it polls.
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(client.Discovery()))
	metadataInformers := metadataInformerFactory{metadatainformer.NewSharedInformerFactory(metadataClient, 0)}
	started := make(chan struct{})
	close(started)
	gc, err := garbagecollector.NewGarbageCollector(ctx, client, metadataClient, mapper,
		garbagecollector.DefaultIgnoredResources(), metadataInformers, started)
	if err != nil {
		return fmt.Errorf("create garbage collector: %w", err)
	}
	wg.Go(func() { gc.Run(ctx, 4, gcResyncPeriod) })
	wg.Go(func() { gc.Sync(ctx, client.Discovery(), gcResyncPeriod) })
	wg.Go(func() { wait.UntilWithContext(ctx, func(context.Context) { mapper.Reset() }, gcResyncPeriod) })
	wg.Go(func() {
		<-ctx.Done()
		metadataInformers.Shutdown()
	})
	return nil
}

// clientFor is a clientset that identifies itself as component, so the
// API server's logs and managed fields tell the controllers apart.
func (c *Cluster) clientFor(component string) kubernetes.Interface {
	client, err := kubernetes.NewForConfig(restclient.AddUserAgent(restclient.CopyConfig(c.Config), component))
	if err != nil {
		// NewForConfig fails only on a malformed config, and c.Config
		// already built c.Client.
		return c.Client
	}
	return client
}

// crdConfigFor is the sandbox's config for custom resources (served as
// JSON only), identifying itself as component.
func (c *Cluster) crdConfigFor(component string) *restclient.Config {
	cfg := restclient.AddUserAgent(restclient.CopyConfig(c.Config), component)
	cfg.ContentType = "application/json"
	cfg.AcceptContentTypes = "application/json"
	return cfg
}

// metadataInformerFactory serves the garbage collector's monitors from
// metadata-only informers: the collector reads nothing but owner
// references, and metadata is all it needs for built-in and custom types
// alike.
type metadataInformerFactory struct {
	metadatainformer.SharedInformerFactory
}

func (f metadataInformerFactory) ForResource(gvr schema.GroupVersionResource) (informers.GenericInformer, error) {
	return f.SharedInformerFactory.ForResource(gvr), nil
}
