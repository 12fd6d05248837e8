package groupcache

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	schedulinglisters "k8s.io/client-go/listers/scheduling/v1"
	restclient "k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	xversioned "sigs.k8s.io/scheduler-plugins/pkg/generated/clientset/versioned"

	v1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
	"github.com/phalanx-sched/phalanx/pkg/generated/clientset/versioned"
	phalanxinformers "github.com/phalanx-sched/phalanx/pkg/generated/informers/externalversions"
	phalanxlisters "github.com/phalanx-sched/phalanx/pkg/generated/listers/scheduling/v1alpha1"
	"github.com/phalanx-sched/phalanx/pkg/groups"
)

// Fed is a Cache wired to informers.
type Fed struct {
	*groups.Cache
	// PriorityClasses resolves group priorities.
	PriorityClasses schedulinglisters.PriorityClassLister
	// PodGroups and CompositePodGroups read the group objects as the
	// cache last saw them.
	PodGroups          phalanxlisters.PodGroupLister
	CompositePodGroups phalanxlisters.CompositePodGroupLister
	// feeds are the other dialects' informers, started while the API
	// server serves their resources (feeds.go).
	feeds *feeds
	// onChange subscribers run after a group object or member changed, with
	// the leaf or composite key and whether the group object itself changed.
	onChange []func(k groups.Key, object bool)
	// onGone subscribers run when a group left the cache's live groups:
	// its object was deleted, or the last member of a label group is gone.
	onGone []func(k groups.Key)
	mu     sync.Mutex
}

// NewFed returns a cache that no informer feeds yet: Informed wires one to
// the scheduler's informers, and callers without an API server (tests)
// feed it through the On* handlers.
func NewFed() *Fed { return &Fed{Cache: groups.NewCache()} }

// SubscribeGone registers fn to be called, outside the cache lock, when
// group k is gone: its PodGroup or CompositePodGroup was deleted, or the
// last member of a label group left. Plugins tie their per-group state to
// this, so nothing outlives the groups it was kept for.
func (f *Fed) SubscribeGone(fn func(k groups.Key)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.onGone = append(f.onGone, fn)
}

// goneIfMissing tells the onGone subscribers when k is no longer a live
// group.
func (f *Fed) goneIfMissing(k groups.Key) {
	if _, live := f.Get(k); live {
		return
	}
	f.mu.Lock()
	subs := f.onGone
	f.mu.Unlock()
	for _, fn := range subs {
		fn(k)
	}
}

// OnPod, OnPodDeleted, OnPodGroup, OnComposite and OnGroupDeleted are the
// informers' handlers, for callers that feed the cache themselves.
func (f *Fed) OnPod(obj interface{})        { f.podChanged(obj, false) }
func (f *Fed) OnPodDeleted(obj interface{}) { f.podDeleted(obj) }
func (f *Fed) OnPodGroup(obj interface{})   { f.podGroupChanged(obj) }
func (f *Fed) OnComposite(obj interface{})  { f.compositeChanged(obj) }

// OnGroup and OnGone record a group object's definition or deletion in any
// dialect, as the dialects' informers do.
func (f *Fed) OnGroup(k groups.Key, spec groups.Spec) { f.set(k, spec) }
func (f *Fed) OnGone(k groups.Key)                    { f.deleted(k) }

// OnGroupDeleted handles a deleted PodGroup (kind PodGroupKind) or
// CompositePodGroup (CompositeKind).
func (f *Fed) OnGroupDeleted(obj interface{}, kind groups.Kind) { f.groupDeleted(obj, kind) }

// Subscribe registers fn to be called after group changes, outside the
// cache lock. Plugins use it to react to state the scheduler's own event
// handlers may see before this cache does (their order is not defined).
func (f *Fed) Subscribe(fn func(k groups.Key, object bool)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.onChange = append(f.onChange, fn)
}

func (f *Fed) notify(k groups.Key, object bool) {
	f.mu.Lock()
	subs := f.onChange
	f.mu.Unlock()
	for _, fn := range subs {
		fn(k, object)
	}
}

// Informed builds and syncs the cache of the scheduler that owns factory,
// until ctx ends. A scheduler builds one for all its profiles (the plugins'
// runtime, pkg/plugins/pluginrt, holds it), since they share one informer
// factory. The CRD informers are started here; pod and PriorityClass
// informers come from the scheduler's factory, which the scheduler starts
// itself.
func Informed(ctx context.Context, factory informers.SharedInformerFactory, cfg *restclient.Config) (*Fed, error) {
	crdCfg := restclient.CopyConfig(cfg)
	crdCfg.ContentType = "application/json"
	crdCfg.AcceptContentTypes = "application/json"
	client, err := versioned.NewForConfig(crdCfg)
	if err != nil {
		return nil, fmt.Errorf("phalanx clientset: %w", err)
	}
	pf := phalanxinformers.NewSharedInformerFactory(client, 0)
	f := &Fed{Cache: groups.NewCache(), PriorityClasses: factory.Scheduling().V1().PriorityClasses().Lister(),
		PodGroups: pf.Scheduling().V1alpha1().PodGroups().Lister(), CompositePodGroups: pf.Scheduling().V1alpha1().CompositePodGroups().Lister()}

	podInf := factory.Core().V1().Pods().Informer()
	if _, err := podInf.AddEventHandler(cache.ResourceEventHandlerDetailedFuncs{
		// The initial list is told apart: a member bound in it may have
		// been bound by an earlier run of the scheduler (AddListedPod).
		AddFunc:    func(obj interface{}, initial bool) { f.podChanged(obj, initial) },
		UpdateFunc: func(_, obj interface{}) { f.podChanged(obj, false) },
		DeleteFunc: func(obj interface{}) { f.podDeleted(obj) },
	}); err != nil {
		return nil, err
	}

	pgInf := pf.Scheduling().V1alpha1().PodGroups().Informer()
	pgReg, err := pgInf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj interface{}) { f.podGroupChanged(obj) },
		UpdateFunc: func(old, obj interface{}) {
			if !specChanged(old, obj) {
				return
			}
			f.podGroupChanged(obj)
		},
		DeleteFunc: func(obj interface{}) { f.groupDeleted(obj, groups.PodGroupKind) },
	})
	if err != nil {
		return nil, err
	}
	cpgInf := pf.Scheduling().V1alpha1().CompositePodGroups().Informer()
	cpgReg, err := cpgInf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj interface{}) { f.compositeChanged(obj) },
		UpdateFunc: func(old, obj interface{}) {
			if !specChanged(old, obj) {
				return
			}
			f.compositeChanged(obj)
		},
		DeleteFunc: func(obj interface{}) { f.groupDeleted(obj, groups.CompositeKind) },
	})
	if err != nil {
		return nil, err
	}
	// PriorityClasses must be known before the first PreFilter resolves one.
	// The globalDefault class is kept from their events, so a group without
	// a class name resolves without listing every class.
	classes := NewPriorityClasses(f.PriorityClasses)
	if _, err := factory.Scheduling().V1().PriorityClasses().Informer().AddEventHandler(classes.Handler()); err != nil {
		return nil, err
	}
	f.PriorityClasses = classes

	// The CRD informers list while the optional dialects are discovered
	// and synced: this all runs before the scheduler's own informers
	// start, so each wait done in turn would delay the first gang.
	pf.Start(ctx.Done())
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubernetes clientset: %w", err)
	}
	x, err := xversioned.NewForConfig(crdCfg)
	if err != nil {
		return nil, fmt.Errorf("scheduler-plugins clientset: %w", err)
	}
	f.feeds = newFeeds(f, kube.Discovery(), kube, x)
	f.feeds.sync(ctx)
	// The handlers, not only the informers, must have seen the first
	// list: a group the cache has not been told of yet holds its members
	// as pointing at a missing group.
	syncCtx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if !cache.WaitFor(syncCtx, "", pgReg.HasSyncedChecker(), cpgReg.HasSyncedChecker()) {
		f.feeds.stopAll()
		return nil, fmt.Errorf("sync the PodGroup and CompositePodGroup informers: is the scheduling.phalanx.dev CRD installed? (kubectl apply -f manifests/crds/)")
	}
	go f.feeds.run(ctx, discoveryInterval)
	go func() {
		<-ctx.Done()
		pf.Shutdown()
	}()
	return f, nil
}

func (f *Fed) podChanged(obj interface{}, listed bool) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	old, wasTracked := f.GroupOf(pod.UID)
	if listed {
		f.AddListedPod(pod)
	} else {
		f.AddOrUpdatePod(pod)
	}
	k, ok := f.GroupOf(pod.UID)
	if ok {
		f.notify(k, false)
	}
	if wasTracked && (!ok || k != old) {
		// The pod left its group (a label changed): it may have been the
		// last member of a label group.
		f.goneIfMissing(old)
	}
}

func (f *Fed) podDeleted(obj interface{}) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	k, tracked := f.GroupOf(pod.UID)
	f.DeletePod(pod)
	if tracked {
		f.notify(k, false)
		f.goneIfMissing(k)
	}
}

// specChanged reports whether an update of a group object can matter to
// scheduling. The CRDs have a status subresource, so metadata.generation
// moves with every spec change and never with a status write; the
// scheduler's own condition writes would otherwise drop plans, bump
// revisions and wake held members for nothing.
func specChanged(old, obj interface{}) bool {
	o, ok1 := old.(metav1.Object)
	n, ok2 := obj.(metav1.Object)
	return !ok1 || !ok2 || o.GetGeneration() != n.GetGeneration() || o.GetUID() != n.GetUID()
}

func (f *Fed) podGroupChanged(obj interface{}) {
	if pg, ok := obj.(*v1alpha1.PodGroup); ok {
		f.set(groups.Key{Kind: groups.PodGroupKind, Namespace: pg.Namespace, Name: pg.Name}, groups.SpecOfPodGroup(pg))
	}
}

func (f *Fed) compositeChanged(obj interface{}) {
	if cpg, ok := obj.(*v1alpha1.CompositePodGroup); ok {
		f.set(groups.Key{Kind: groups.CompositeKind, Namespace: cpg.Namespace, Name: cpg.Name}, groups.SpecOfComposite(cpg))
	}
}

func (f *Fed) groupDeleted(obj interface{}, kind groups.Kind) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	var k groups.Key
	switch o := obj.(type) {
	case *v1alpha1.PodGroup:
		k = groups.Key{Kind: kind, Namespace: o.Namespace, Name: o.Name}
	case *v1alpha1.CompositePodGroup:
		k = groups.Key{Kind: kind, Namespace: o.Namespace, Name: o.Name}
	default:
		return
	}
	f.deleted(k)
}

// deleted records that group object k is gone, in any dialect.
func (f *Fed) deleted(k groups.Key) {
	f.DeleteGroup(k)
	f.notify(k, true)
	f.goneIfMissing(k)
}

// set records group object k's definition, in any dialect.
func (f *Fed) set(k groups.Key, spec groups.Spec) {
	f.SetGroup(k, spec)
	f.notify(k, true)
}
