// Package pluginrt is what Phalanx's plugins share without importing one
// another: the runtime one scheduler's plugins run on (Runtime), their
// names, and the signals one plugin leaves another in a cycle's state.
package pluginrt

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"k8s.io/client-go/informers"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/phalanx-sched/phalanx/pkg/groupcache"
	"github.com/phalanx-sched/phalanx/pkg/groupstatus"
)

// Runtime is one scheduler's Phalanx state, shared by the plugins of all
// its profiles: the group cache, the one status writer (so two profiles
// never race on a group's status), what a plugin keeps per scheduler
// rather than per profile (the gang plugin's bind slots and event
// throttling), and the plugin objects diagnostics read. plugins.Registry
// builds one per scheduler, and every plugin factory captures it.
//
// The cache and writer need the scheduler's informer factory, which the
// framework only hands to plugin factories, so the first factory call
// builds them. They end with that call's context; a scheduler set up again
// on the same Runtime gets new ones.
type Runtime struct {
	mu      sync.Mutex
	inst    *Instance
	plugins map[pluginKey]fwk.Plugin
	// listed is set once the scheduler's event handlers have taken in its
	// informers' first lists (MarkListed).
	listed atomic.Bool
}

// MarkListed records that the scheduler's event handlers have taken in
// the informers' first lists: what the scheduler waits for before its
// first cycle. Whoever starts the scheduler calls it then; the gang
// plugin calls it at the first cycle of any profile, for a scheduler
// started without it.
func (r *Runtime) MarkListed() { r.listed.Store(true) }

// Listed reports whether MarkListed was called.
func (r *Runtime) Listed() bool { return r.listed.Load() }

type pluginKey struct {
	handle fwk.Handle
	name   string
}

// Instance is the state of one run of the scheduler: it lives as long as
// the context the scheduler's plugins were built with.
type Instance struct {
	// Lifetime ends when the scheduler stops.
	Lifetime context.Context
	Groups   *groupcache.Fed
	Status   *groupstatus.Writer

	factory informers.SharedInformerFactory
	mu      sync.Mutex
	shared  map[string]any
}

// New returns an empty Runtime.
func New() *Runtime { return &Runtime{plugins: map[pluginKey]fwk.Plugin{}} }

// Instance returns the state of the scheduler whose plugin factory was
// called with ctx and h, building it on the first call.
func (r *Runtime) Instance(ctx context.Context, h fwk.Handle) (*Instance, error) {
	factory := h.SharedInformerFactory()
	r.mu.Lock()
	defer r.mu.Unlock()
	if i := r.inst; i != nil && i.factory == factory && i.Lifetime.Err() == nil {
		return i, nil
	}
	fed, err := groupcache.Informed(ctx, factory, h.KubeConfig())
	if err != nil {
		return nil, err
	}
	w, err := groupstatus.New(ctx, fed, h.KubeConfig())
	if err != nil {
		return nil, err
	}
	r.inst = &Instance{Lifetime: ctx, Groups: fed, Status: w, factory: factory, shared: map[string]any{}}
	return r.inst, nil
}

// Groups returns the group cache of the running scheduler; false before
// its plugins are built or after it stopped.
func (r *Runtime) Groups() (*groupcache.Fed, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.inst == nil || r.inst.Lifetime.Err() != nil {
		return nil, false
	}
	return r.inst.Groups, true
}

// Shared returns what the plugin called name keeps for the whole
// scheduler, building it with build on the first call. An error from
// build is returned and nothing is kept.
func Shared[T any](i *Instance, name string, build func() (T, error)) (T, error) {
	i.mu.Lock()
	defer i.mu.Unlock()
	if v, ok := i.shared[name]; ok {
		t, ok := v.(T)
		if !ok {
			var zero T
			return zero, fmt.Errorf("shared state %q is a %T", name, v)
		}
		return t, nil
	}
	t, err := build()
	if err != nil {
		return t, err
	}
	i.shared[name] = t
	return t, nil
}

// Register records p as the plugin its Name() reports in the profile behind
// h, until ctx (the framework's) is done, for Plugin. h is the handle the
// framework passed to p's factory, which is the profile's framework itself.
func (r *Runtime) Register(ctx context.Context, h fwk.Handle, p fwk.Plugin) {
	k := pluginKey{handle: h, name: p.Name()}
	r.mu.Lock()
	r.plugins[k] = p
	r.mu.Unlock()
	go func() {
		<-ctx.Done()
		r.mu.Lock()
		if r.plugins[k] == p {
			delete(r.plugins, k)
		}
		r.mu.Unlock()
	}()
}

// Plugin returns the plugin called name that the profile behind h runs.
// kube-scheduler's framework keeps its plugin objects private, but the
// diagnostics endpoints (pkg/inspect) must read what the running plugins
// hold for a group to explain it as the scheduler sees it.
func (r *Runtime) Plugin(h fwk.Handle, name string) (fwk.Plugin, bool) {
	// h may be a framework wrapped after the plugins were built (gang's
	// QuietMemberEvents), which offers the framework it wraps.
	if w, ok := h.(interface{ Unwrap() fwk.Handle }); ok {
		h = w.Unwrap()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	p, ok := r.plugins[pluginKey{handle: h, name: name}]
	return p, ok
}
