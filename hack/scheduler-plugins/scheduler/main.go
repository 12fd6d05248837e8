// Command scheduler is scheduler-plugins' kube-scheduler (sigs.k8s.io/
// scheduler-plugins v0.34.7, Kubernetes v1.34 libraries) with its
// Coscheduling plugin registered: the anchor that `phalanx-sim bench` runs
// as its scheduler-plugins arm. Other out-of-tree plugins of that project
// are not registered; a profile that names one fails at start-up.
package main

import (
	"os"

	"k8s.io/component-base/cli"
	// Client-go and version metrics, as kube-scheduler registers them.
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version"
	"k8s.io/kubernetes/cmd/kube-scheduler/app"

	// Registers CoschedulingArgs (and the other plugin args) with the
	// scheduler's config scheme, so pluginConfig decodes.
	_ "sigs.k8s.io/scheduler-plugins/apis/config/scheme"
	"sigs.k8s.io/scheduler-plugins/pkg/coscheduling"
)

func main() {
	cmd := app.NewSchedulerCommand(app.WithPlugin(coscheduling.Name, coscheduling.New))
	os.Exit(cli.Run(cmd))
}
