// Package inspect answers, inside a running Phalanx scheduler, the
// questions kubectl phalanx asks: what the group cache holds, why a group
// is pending, whether a group that does not exist yet would fit, and where
// every group stands. It serves them as JSON (pkg/debugapi) under
// /debug/phalanx.
//
// Answers come from the scheduler's own planner and view, not from a model
// of them: the group cache the plugins use, a snapshot taken from the
// scheduler's cache (the node state its next scheduling cycle sees,
// assumed pods included), the room nominated to pending pods, the
// topology plugin's memory of refused nodes and the preemption plugin's
// victim search. The one thing that is not shared is the framework
// snapshot itself: the scheduling loop rewrites it at every cycle without
// a lock, so reading it from an HTTP handler would race. The inspector
// therefore keeps a snapshot of its own, refreshed from the scheduler's
// cache on every request, and a framework of each profile's PreFilter and
// Filter plugins over that snapshot, so the probes of the profile's
// filters (pod affinity, ports, volumes...) run exactly as they do in a
// cycle.
package inspect

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler"
	"k8s.io/kubernetes/pkg/scheduler/apis/config"
	backendcache "k8s.io/kubernetes/pkg/scheduler/backend/cache"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	frameworkplugins "k8s.io/kubernetes/pkg/scheduler/framework/plugins"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/defaultbinder"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/queuesort"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"

	"github.com/phalanx-sched/phalanx/pkg/groupcache"
	"github.com/phalanx-sched/phalanx/pkg/plugins/pluginrt"
)

// phalanxPlugins are left out of the inspector's frameworks: in a probe
// cycle they stand aside anyway, and building them twice would subscribe
// them to the group cache twice.
var phalanxPlugins = map[string]bool{
	pluginrt.QueueSortName: true, pluginrt.GangName: true, pluginrt.TopologyName: true, pluginrt.PreemptionName: true,
}

// Options configure an Inspector.
type Options struct {
	// Identity names the replica in answers: its leader-election identity
	// or host name.
	Identity string
	// Leading reports whether this replica is the one scheduling, and who
	// is when it is not. nil: always (no leader election).
	Leading func(ctx context.Context) (leading bool, leader string, err error)
	// Parallelism is the scheduler's (KubeSchedulerConfiguration
	// parallelism), for the probes; 0 takes the framework's default.
	Parallelism int
	// Limits bound the requests the Handler takes; zero fields take
	// DefaultLimits.
	Limits Limits
	// Filters are the out-of-tree filter plugins the profiles may run
	// (plugins.FilterPlugins): the probes' framework builds the profile's
	// filters from the in-tree registry and these.
	Filters frameworkruntime.Registry
}

// Inspector answers diagnostics questions for one scheduler.
type Inspector struct {
	opts  Options
	sched *scheduler.Scheduler
	fed   *groupcache.Fed

	// mu serializes requests: they share snap and the probers' caches.
	mu       sync.Mutex
	snap     *backendcache.Snapshot
	profiles map[string]*profile
	names    []string
	// overlay is the DRA manager of the inspector's frameworks: the
	// scheduler's, with a fit request's claims; nil without DRA.
	overlay *claimOverlay
}

// profile is what the inspector keeps per scheduling profile.
type profile struct {
	name string
	// real is the profile's framework, which the scheduling loop runs: its
	// plugins, nominator and informers are read, its snapshot never.
	real framework.Framework
	// shadow runs the profile's PreFilter and Filter plugins over the
	// inspector's snapshot.
	shadow framework.Framework
	// plugins is what the profile's Phalanx plugins let the diagnostics
	// read (pluginrt.Diagnostics).
	plugins pluginrt.Diagnostics
}

// New builds an inspector for sched, whose profiles cfg configured and
// whose plugins share rt. Call it where the scheduler is built, with the
// feature gates the scheduler runs with: the frameworks and the snapshot
// read them once.
func New(ctx context.Context, rt *pluginrt.Runtime, cfg []config.KubeSchedulerProfile, sched *scheduler.Scheduler, opts Options) (*Inspector, error) {
	in := &Inspector{opts: opts, sched: sched, snap: backendcache.NewEmptySnapshot(), profiles: map[string]*profile{}}
	for i := range cfg {
		name := cfg[i].SchedulerName
		real, ok := sched.Profiles[name]
		if !ok {
			return nil, fmt.Errorf("inspect: the scheduler has no profile %q", name)
		}
		p := &profile{name: name, real: real, plugins: rt.Diagnostics(real)}
		if p.plugins.Permits == nil {
			// Not a Phalanx profile: nothing of it to explain.
			continue
		}
		if in.overlay == nil && real.SharedDRAManager() != nil {
			in.overlay = &claimOverlay{SharedDRAManager: real.SharedDRAManager()}
		}
		var dra fwk.SharedDRAManager
		if in.overlay != nil {
			dra = in.overlay
		}
		shadow, err := newShadow(ctx, &cfg[i], real, dra, in.snap, opts.Parallelism, opts.Filters)
		if err != nil {
			return nil, fmt.Errorf("inspect: profile %s: %w", name, err)
		}
		p.shadow = shadow
		in.profiles[name] = p
		in.names = append(in.names, name)
	}
	if len(in.profiles) == 0 {
		return nil, errors.New("inspect: no profile runs the Phalanx plugins")
	}
	slices.Sort(in.names)
	fed, ok := rt.Groups()
	if !ok {
		return nil, errors.New("inspect: the scheduler's plugins have stopped")
	}
	in.fed = fed
	return in, nil
}

// newShadow builds a framework with the PreFilter and Filter plugins real
// runs, configured alike, over snap. It never schedules: it exists so the
// probe of the profile's filters can run outside the scheduling loop.
func newShadow(ctx context.Context, cfg *config.KubeSchedulerProfile, real framework.Framework, dra fwk.SharedDRAManager, snap *backendcache.Snapshot, parallelism int, filters frameworkruntime.Registry) (framework.Framework, error) {
	running := real.ListPlugins()
	keep := func(ps []config.Plugin) []config.Plugin {
		var out []config.Plugin
		for _, p := range ps {
			if !phalanxPlugins[p.Name] {
				out = append(out, config.Plugin{Name: p.Name})
			}
		}
		return out
	}
	all := []config.Plugin{{Name: "*"}}
	prof := &config.KubeSchedulerProfile{
		SchedulerName: cfg.SchedulerName + "/inspect",
		PluginConfig:  cfg.PluginConfig,
		Plugins: &config.Plugins{
			// A framework must sort and bind; these never run.
			QueueSort: config.PluginSet{Enabled: []config.Plugin{{Name: queuesort.Name}}, Disabled: all},
			Bind:      config.PluginSet{Enabled: []config.Plugin{{Name: defaultbinder.Name}}, Disabled: all},
			PreFilter: config.PluginSet{Enabled: keep(running.PreFilter.Enabled), Disabled: all},
			Filter:    config.PluginSet{Enabled: keep(running.Filter.Enabled), Disabled: all},
		},
	}
	opts := []frameworkruntime.Option{
		frameworkruntime.WithClientSet(real.ClientSet()),
		frameworkruntime.WithKubeConfig(real.KubeConfig()),
		frameworkruntime.WithInformerFactory(real.SharedInformerFactory()),
		frameworkruntime.WithSharedDRAManager(dra),
		frameworkruntime.WithSharedCSIManager(real.SharedCSIManager()),
		frameworkruntime.WithSnapshotSharedLister(snap),
		frameworkruntime.WithPodNominator(real),
		frameworkruntime.WithLogger(klog.FromContext(ctx).WithName("inspect")),
	}
	if parallelism > 0 {
		opts = append(opts, frameworkruntime.WithParallelism(parallelism))
	}
	registry := frameworkplugins.NewInTreeRegistry()
	if err := registry.Merge(filters); err != nil {
		return nil, err
	}
	return frameworkruntime.NewFramework(ctx, registry, prof, opts...)
}

// refresh brings the inspector's snapshot up to the scheduler's cache and
// returns its nodes. Callers hold in.mu.
func (in *Inspector) refresh(ctx context.Context) ([]fwk.NodeInfo, error) {
	// A request that timed out while it waited for its turn has no one
	// left to answer.
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := in.sched.Cache.UpdateSnapshot(klog.FromContext(ctx), in.snap); err != nil {
		return nil, fmt.Errorf("snapshot the scheduler's cache: %w", err)
	}
	return in.snap.NodeInfos().List()
}

// templates reads ResourceClaimTemplates of the cluster for fit requests
// whose pods name templates the request lacks.
func (in *Inspector) templates(ctx context.Context) templateLookup {
	for _, p := range in.profiles {
		client := p.real.ClientSet()
		if client == nil {
			return nil
		}
		return func(namespace, name string) (*resourceapi.ResourceClaimTemplate, error) {
			return client.ResourceV1().ResourceClaimTemplates(namespace).Get(ctx, name, metav1.GetOptions{})
		}
	}
	return nil
}

// view is what the profile's plugins answer the inspector against: its
// framework over the inspector's snapshot, whose nodes infos are, and the
// scheduler's nominations.
func (p *profile) view(infos []fwk.NodeInfo) pluginrt.View {
	return pluginrt.View{Handle: p.shadow, Nodes: infos, Nominated: p.real.NominatedPodsForNode}
}

// profileFor picks the profile that schedules pods with schedulerName, or
// the first Phalanx profile when no pod says.
func (in *Inspector) profileFor(schedulerName string) (*profile, error) {
	if schedulerName == "" {
		return in.profiles[in.names[0]], nil
	}
	if p := in.profiles[schedulerName]; p != nil {
		return p, nil
	}
	return nil, fmt.Errorf("this scheduler has no Phalanx profile %q (it runs %v)", schedulerName, in.names)
}
