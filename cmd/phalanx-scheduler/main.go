// Command phalanx-scheduler is kube-scheduler with the Phalanx plugins
// compiled in. It takes every kube-scheduler flag, plus
// --bind-drain-timeout (pkg/graceful); enable the plugins in the --config
// profile (see config/).
package main

import (
	"fmt"
	"os"

	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version"

	"github.com/phalanx-sched/phalanx/pkg/graceful"
	"github.com/phalanx-sched/phalanx/pkg/plugins"
)

func main() {
	if err := plugins.ApplyFeatureDefaults(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(cli.Run(graceful.NewCommand()))
}
