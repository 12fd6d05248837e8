// Package plugins holds the Phalanx scheduler-framework plugins, one package
// each, and the registry that compiles them into kube-scheduler.
package plugins

import (
	"fmt"

	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/kubernetes/cmd/kube-scheduler/app"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"

	"github.com/phalanx-sched/phalanx/pkg/plugins/dra"
	"github.com/phalanx-sched/phalanx/pkg/plugins/gang"
	"github.com/phalanx-sched/phalanx/pkg/plugins/pluginrt"
	"github.com/phalanx-sched/phalanx/pkg/plugins/podaffinity"
	"github.com/phalanx-sched/phalanx/pkg/plugins/preemption"
	"github.com/phalanx-sched/phalanx/pkg/plugins/queuesort"
	"github.com/phalanx-sched/phalanx/pkg/plugins/topology"
)

// RegistryFor lists the plugins of one scheduler instance: they share rt,
// and its graceful stop waits on d (pkg/graceful). Both
// cmd/phalanx-scheduler and the sandbox use it, so tests exercise exactly
// the binary's code path. Every profile's plugins are built from these
// factories, so the profiles share rt's cache, status writer and bind
// slots.
func RegistryFor(rt *pluginrt.Runtime, d *gang.Drain) []app.Option {
	opts := []app.Option{
		app.WithPlugin(queuesort.Name, queuesort.Factory(rt)),
		app.WithPlugin(gang.Name, gang.Factory(rt, d)),
		app.WithPlugin(topology.Name, topology.Factory(rt)),
		app.WithPlugin(preemption.Name, preemption.Factory(rt)),
	}
	for name, factory := range FilterPlugins(rt) {
		opts = append(opts, app.WithPlugin(name, factory))
	}
	return opts
}

// FilterPlugins are the plugins of RegistryFor that a profile runs in
// place of upstream's filters. The diagnostics (pkg/inspect) build a
// framework of the profile's filters for their probes, which must find
// these by name too: without them a profile running one could not start
// its diagnostics, and the scheduler did not start.
func FilterPlugins(rt *pluginrt.Runtime) frameworkruntime.Registry {
	return frameworkruntime.Registry{
		dra.Name:         dra.Factory(rt),
		podaffinity.Name: podaffinity.New,
	}
}

// featureDefaults are the feature gates in which phalanx-scheduler departs
// from kube-scheduler's defaults.
//
// NominatedNodeNameForExpectation (beta, on upstream) patches
// status.nominatedNodeName of every pod that waits in Permit, before it
// binds, to tell other components where it is going. Every gang member but
// the last waits in Permit, so that is one more API write per member, and
// the API server is what limits gang throughput (the measurement is in
// docs/benchmarks.md, "Bind pacing and one write less per gang member").
// --feature-gates=NominatedNodeNameForExpectation=true turns it back on.
var featureDefaults = map[string]bool{"NominatedNodeNameForExpectation": false}

// ApplyFeatureDefaults sets featureDefaults on the process's feature gates.
// Call it before flags are parsed: --feature-gates still overrides them.
func ApplyFeatureDefaults() error {
	if err := utilfeature.DefaultMutableFeatureGate.SetFromMap(featureDefaults); err != nil {
		return fmt.Errorf("phalanx feature defaults: %w", err)
	}
	return nil
}
