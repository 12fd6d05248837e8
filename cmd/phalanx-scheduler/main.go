// Command phalanx-scheduler is kube-scheduler with the Phalanx plugins
// compiled in. It takes every kube-scheduler flag; enable the plugins in the
// --config profile (see config/).
package main

import (
	"fmt"
	"os"

	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version"
	"k8s.io/kubernetes/cmd/kube-scheduler/app"

	"github.com/phalanx-sched/phalanx/pkg/plugins"
)

func main() {
	if err := plugins.ApplyFeatureDefaults(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	command := app.NewSchedulerCommand(plugins.Registry()...)
	command.Use = "phalanx-scheduler"
	os.Exit(cli.Run(command))
}
