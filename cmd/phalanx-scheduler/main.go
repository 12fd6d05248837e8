// Command phalanx-scheduler is kube-scheduler with the Phalanx plugins
// compiled in. It takes every kube-scheduler flag, plus
// --bind-drain-timeout (a graceful stop, pkg/graceful) and --phalanx-port
// (/debug/phalanx for kubectl phalanx); enable the plugins in the --config
// profile (see config/). The command itself is pkg/schedulercmd.
package main

import (
	"fmt"
	"os"

	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version"

	"github.com/phalanx-sched/phalanx/pkg/plugins"
	"github.com/phalanx-sched/phalanx/pkg/schedulercmd"
)

func main() {
	if err := plugins.ApplyFeatureDefaults(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(cli.Run(schedulercmd.NewCommand()))
}
