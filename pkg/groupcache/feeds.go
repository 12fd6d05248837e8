package groupcache

import (
	"context"
	"strings"
	"sync"
	"time"

	schedv1alpha3 "k8s.io/api/scheduling/v1alpha3"
	schedv1beta1 "k8s.io/api/scheduling/v1beta1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	alpha3listers "k8s.io/client-go/listers/scheduling/v1alpha3"
	beta1listers "k8s.io/client-go/listers/scheduling/v1beta1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	xv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"
	xversioned "sigs.k8s.io/scheduler-plugins/pkg/generated/clientset/versioned"
	xlisters "sigs.k8s.io/scheduler-plugins/pkg/generated/listers/scheduling/v1alpha1"

	"github.com/phalanx-sched/phalanx/pkg/groups"
)

// discoveryInterval is how often the scheduler asks the API server which
// dialects it serves. A dialect whose API is turned on later is picked up
// within it; one turned off is dropped within it.
const discoveryInterval = 30 * time.Second

// A feed is the informer of one optional group resource. It runs only
// while the API server serves the resource, so the same binary and profile
// run on clusters with or without upstream's workload API or
// scheduler-plugins' CRD, and a resource that stops being served costs one
// log line instead of a reflector retrying forever.
type feed struct {
	dialect  groups.Dialect
	kind     groups.Kind
	gv       schema.GroupVersion
	resource string
	// start creates the informer on a fresh factory, wires it to the cache
	// and starts it; it returns the cache's handler, synced once the
	// handler has seen the first list.
	start func(stop <-chan struct{}) cache.ResourceEventHandlerRegistration

	stop    chan struct{}
	running bool
}

func (fd *feed) String() string { return fd.resource + "." + fd.gv.String() }

// feeds runs the optional dialects' informers.
type feeds struct {
	fed  *Fed
	disc discovery.DiscoveryInterface
	list []*feed

	mu               sync.Mutex
	nativePodGroups  beta1listers.PodGroupLister
	nativeComposites alpha3listers.CompositePodGroupLister
	xPodGroups       xlisters.PodGroupLister
}

func newFeeds(f *Fed, disc discovery.DiscoveryInterface, kube kubernetes.Interface, x xversioned.Interface) *feeds {
	fs := &feeds{fed: f, disc: disc}
	fs.list = []*feed{
		{dialect: groups.Native, kind: groups.PodGroupKind, gv: schedv1beta1.SchemeGroupVersion, resource: "podgroups",
			start: func(stop <-chan struct{}) cache.ResourceEventHandlerRegistration {
				fac := informers.NewSharedInformerFactory(kube, 0)
				inf := fac.Scheduling().V1beta1().PodGroups()
				reg := fs.handle(inf.Informer(), groups.Native, groups.PodGroupKind, func(obj interface{}) (string, string, groups.Spec, bool) {
					pg, ok := obj.(*schedv1beta1.PodGroup)
					if !ok {
						return "", "", groups.Spec{}, false
					}
					return pg.Namespace, pg.Name, groups.SpecOfNativePodGroup(pg), true
				})
				fs.mu.Lock()
				fs.nativePodGroups = inf.Lister()
				fs.mu.Unlock()
				fac.Start(stop)
				return reg
			}},
		{dialect: groups.Native, kind: groups.CompositeKind, gv: schedv1alpha3.SchemeGroupVersion, resource: "compositepodgroups",
			start: func(stop <-chan struct{}) cache.ResourceEventHandlerRegistration {
				fac := informers.NewSharedInformerFactory(kube, 0)
				inf := fac.Scheduling().V1alpha3().CompositePodGroups()
				reg := fs.handle(inf.Informer(), groups.Native, groups.CompositeKind, func(obj interface{}) (string, string, groups.Spec, bool) {
					cpg, ok := obj.(*schedv1alpha3.CompositePodGroup)
					if !ok {
						return "", "", groups.Spec{}, false
					}
					return cpg.Namespace, cpg.Name, groups.SpecOfNativeComposite(cpg), true
				})
				fs.mu.Lock()
				fs.nativeComposites = inf.Lister()
				fs.mu.Unlock()
				fac.Start(stop)
				return reg
			}},
		{dialect: groups.Coscheduling, kind: groups.PodGroupKind, gv: xv1alpha1.SchemeGroupVersion, resource: "podgroups",
			start: func(stop <-chan struct{}) cache.ResourceEventHandlerRegistration {
				// Built by hand rather than from the module's generated
				// factory, which predates client-go's streaming list and
				// cannot tell a reflector that a client (a test's fake)
				// lacks it.
				inf := cache.NewSharedIndexInformer(cache.ToListWatcherWithWatchListSemantics(&cache.ListWatch{
					ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
						return x.SchedulingV1alpha1().PodGroups(metav1.NamespaceAll).List(ctx, o)
					},
					WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
						return x.SchedulingV1alpha1().PodGroups(metav1.NamespaceAll).Watch(ctx, o)
					},
				}, x), &xv1alpha1.PodGroup{}, 0, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
				reg := fs.handle(inf, groups.Coscheduling, groups.PodGroupKind, func(obj interface{}) (string, string, groups.Spec, bool) {
					pg, ok := obj.(*xv1alpha1.PodGroup)
					if !ok {
						return "", "", groups.Spec{}, false
					}
					return pg.Namespace, pg.Name, groups.SpecOfXPodGroup(pg), true
				})
				fs.mu.Lock()
				fs.xPodGroups = xlisters.NewPodGroupLister(inf.GetIndexer())
				fs.mu.Unlock()
				go inf.RunWithContext(wait.ContextForChannel(stop))
				return reg
			}},
	}
	return fs
}

// handle feeds one informer's objects into the cache. An update is passed
// on only when the translated Spec moved: the scheduler's own status writes
// (and, for scheduler-plugins' groups, its controller's) must not drop
// plans, bump revisions or wake held members.
func (fs *feeds) handle(inf cache.SharedIndexInformer, d groups.Dialect, kind groups.Kind, read func(interface{}) (ns, name string, spec groups.Spec, ok bool)) cache.ResourceEventHandlerRegistration {
	key := func(ns, name string) groups.Key { return groups.Key{Dialect: d, Kind: kind, Namespace: ns, Name: name} }
	// The informer has not started, so the registration cannot fail.
	reg, _ := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj interface{}) {
			if ns, name, spec, ok := read(obj); ok {
				fs.fed.set(key(ns, name), spec)
			}
		},
		UpdateFunc: func(old, obj interface{}) {
			ns, name, spec, ok := read(obj)
			_, _, was, wasOK := read(old)
			if ok && (!wasOK || !groups.SameSpec(was, spec)) {
				fs.fed.set(key(ns, name), spec)
			}
		},
		DeleteFunc: func(obj interface{}) {
			if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			if ns, name, _, ok := read(obj); ok {
				fs.fed.deleted(key(ns, name))
			}
		},
	})
	return reg
}

// served asks discovery whether fd's resource is served. known is false
// when the answer is unknown (the API server did not answer), and the
// feed then stays as it is.
func (fs *feeds) served(fd *feed) (served, known bool) {
	list, err := fs.disc.ServerResourcesForGroupVersion(fd.gv.String())
	if err != nil {
		if apierrors.IsNotFound(err) {
			return false, true
		}
		return false, false
	}
	for _, r := range list.APIResources {
		if r.Name == fd.resource {
			return true, true
		}
	}
	return false, true
}

// sync starts the feeds whose resources are served and stops those whose
// resources are gone, then records which dialects are served.
//
// The feeds it starts list at once and are waited for together, without
// polling: the first sync runs while the scheduler builds its profiles,
// before its own informers start, so every wait here delays the first
// scheduling cycle. Waiting feed after feed with client-go's polling wait
// (100ms a check) cost about 100ms per served dialect at every start.
func (fs *feeds) sync(ctx context.Context) {
	changed := false
	type starting struct {
		fd  *feed
		reg cache.ResourceEventHandlerRegistration
	}
	var started []starting
	for _, fd := range fs.list {
		served, known := fs.served(fd)
		switch {
		case !known || served == fd.running:
		case served:
			fd.stop = make(chan struct{})
			started = append(started, starting{fd, fd.start(fd.stop)})
		default:
			close(fd.stop)
			fd.running, changed = false, true
			klog.InfoS("The API server stopped serving a group resource; its groups are dropped and the other dialects keep scheduling", "resource", fd.String())
			fs.forgetLister(fd)
			fs.fed.dropObjects(fd.dialect, fd.kind)
		}
	}
	if len(started) > 0 {
		checks := make([]cache.DoneChecker, len(started))
		for i, s := range started {
			checks[i] = s.reg.HasSyncedChecker()
		}
		syncCtx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		cache.WaitFor(syncCtx, "", checks...)
		cancel()
		for _, s := range started {
			if !s.reg.HasSynced() {
				// It stays off and is tried again at the next sync.
				close(s.fd.stop)
				klog.InfoS("Group informer did not sync; trying again later", "resource", s.fd.String())
				continue
			}
			s.fd.running, changed = true, true
		}
	}
	for _, d := range groups.Dialects[1:] {
		on := false
		for _, fd := range fs.list {
			on = on || (fd.dialect == d && fd.kind == groups.PodGroupKind && fd.running)
		}
		fs.fed.SetServed(d, on)
	}
	if changed {
		klog.InfoS("Group dialects", "active", strings.Join(fs.active(), ", "))
	}
}

func (fs *feeds) forgetLister(fd *feed) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	switch {
	case fd.dialect == groups.Coscheduling:
		fs.xPodGroups = nil
	case fd.kind == groups.CompositeKind:
		fs.nativeComposites = nil
	default:
		fs.nativePodGroups = nil
	}
}

// active lists the served dialects and their resources, for the log.
func (fs *feeds) active() []string {
	out := []string{groups.Phalanx.String() + " (PodGroup, CompositePodGroup, label gangs)"}
	for _, fd := range fs.list {
		if fd.running {
			out = append(out, fd.String())
		}
	}
	return out
}

// stopAll stops the running feeds.
func (fs *feeds) stopAll() {
	for _, fd := range fs.list {
		if fd.running {
			close(fd.stop)
			fd.running = false
		}
	}
}

func (fs *feeds) run(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			fs.stopAll()
			return
		case <-t.C:
			fs.sync(ctx)
		}
	}
}

// dropObjects forgets every group object of one dialect and kind, as if
// deleted: their members then wait with a message that the dialect is not
// served, instead of being planned against definitions nobody can change.
func (f *Fed) dropObjects(d groups.Dialect, kind groups.Kind) {
	for _, k := range f.ObjectKeys(d, kind) {
		f.deleted(k)
	}
}

// NativePodGroups, NativeComposites and XPodGroups return the listers of
// the optional dialects, nil while the resource is not served.
func (f *Fed) NativePodGroups() beta1listers.PodGroupLister {
	if f.feeds == nil {
		return nil
	}
	f.feeds.mu.Lock()
	defer f.feeds.mu.Unlock()
	return f.feeds.nativePodGroups
}

func (f *Fed) NativeComposites() alpha3listers.CompositePodGroupLister {
	if f.feeds == nil {
		return nil
	}
	f.feeds.mu.Lock()
	defer f.feeds.mu.Unlock()
	return f.feeds.nativeComposites
}

func (f *Fed) XPodGroups() xlisters.PodGroupLister {
	if f.feeds == nil {
		return nil
	}
	f.feeds.mu.Lock()
	defer f.feeds.mu.Unlock()
	return f.feeds.xPodGroups
}
