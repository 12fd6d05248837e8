// Package plugins holds the Phalanx scheduler-framework plugins, one package
// each, and the registry that compiles them into kube-scheduler.
package plugins

import (
	"k8s.io/kubernetes/cmd/kube-scheduler/app"

	"github.com/phalanx-sched/phalanx/pkg/plugins/gang"
	"github.com/phalanx-sched/phalanx/pkg/plugins/preemption"
	"github.com/phalanx-sched/phalanx/pkg/plugins/queuesort"
	"github.com/phalanx-sched/phalanx/pkg/plugins/topology"
)

// Registry lists the out-of-tree plugins of the Phalanx scheduler. Both
// cmd/phalanx-scheduler and the sandbox use it, so tests exercise exactly the
// binary's code path.
func Registry() []app.Option {
	return []app.Option{
		app.WithPlugin(queuesort.Name, queuesort.New),
		app.WithPlugin(gang.Name, gang.New),
		app.WithPlugin(topology.Name, topology.New),
		app.WithPlugin(preemption.Name, preemption.New),
	}
}
