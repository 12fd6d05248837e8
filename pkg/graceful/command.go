package graceful

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apiserver/pkg/server"
	"k8s.io/client-go/tools/cache"
	cliflag "k8s.io/component-base/cli/flag"
	"k8s.io/component-base/cli/globalflag"
	basecompatibility "k8s.io/component-base/compatibility"
	"k8s.io/component-base/featuregate"
	"k8s.io/component-base/logs"
	logsapi "k8s.io/component-base/logs/api/v1"
	"k8s.io/component-base/term"
	"k8s.io/component-base/version/verflag"
	"k8s.io/kubernetes/cmd/kube-scheduler/app"
	"k8s.io/kubernetes/cmd/kube-scheduler/app/options"
)

// DrainTimeoutFlag names the flag that bounds a graceful stop's wait.
const DrainTimeoutFlag = "bind-drain-timeout"

// NewCommand is phalanx-scheduler's command: kube-scheduler's flags and
// run, with the Phalanx plugins and a graceful stop on SIGTERM or SIGINT
// (a second signal exits at once). It is built here rather than taken from
// app.NewSchedulerCommand because that command cancels everything, Lease
// included, on the first signal, and exits while binds are in flight.
func NewCommand() *cobra.Command {
	opts := options.NewOptions()
	drainTimeout := DefaultDrainTimeout
	cmd := &cobra.Command{
		Use: "phalanx-scheduler",
		Long: `phalanx-scheduler is kube-scheduler with the Phalanx plugins compiled in:
gang scheduling, gangs of gangs, topology-aware placement and
workload-aware preemption. It takes every kube-scheduler flag; enable the
plugins in the --config profile.

On SIGTERM it stops scheduling, lets nothing more through Permit, and
waits up to --` + DrainTimeoutFlag + ` for the binds already let through,
so that a gang it was binding ends bound whole, while it still holds its
Lease; then it stops as kube-scheduler does.`,
		PersistentPreRunE: func(*cobra.Command, []string) error {
			// Feature gates and emulated versions must be set before run.
			return opts.ComponentGlobalsRegistry.Set()
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			return run(cmd, opts, drainTimeout)
		},
		Args: func(cmd *cobra.Command, args []string) error {
			for _, a := range args {
				if a != "" {
					return fmt.Errorf("%q takes no arguments, got %q", cmd.CommandPath(), args)
				}
			}
			return nil
		},
	}
	sets := opts.Flags
	verflag.AddFlags(sets.FlagSet("global"))
	globalflag.AddGlobalFlags(sets.FlagSet("global"), cmd.Name(), logs.SkipLoggingConfigurationFlags())
	sets.FlagSet("phalanx").DurationVar(&drainTimeout, DrainTimeoutFlag, DefaultDrainTimeout,
		"On SIGTERM, how long to wait for the binds already let through Permit before stopping, so that no gang is left bound below its minimum. "+
			"Keep it below the pod's terminationGracePeriodSeconds. 0 stops at once.")
	for _, name := range sets.Order {
		cmd.Flags().AddFlagSet(sets.FlagSet(name))
	}
	cols, _, _ := term.TerminalSize(cmd.OutOrStdout())
	cliflag.SetUsageAndHelpFunc(cmd, *sets, cols)
	// Only shell completion uses it.
	_ = cmd.MarkFlagFilename("config", "yaml", "yml", "json")
	return cmd
}

func run(cmd *cobra.Command, opts *options.Options, drainTimeout time.Duration) error {
	verflag.PrintAndExitIfRequested()
	if drainTimeout < 0 {
		return fmt.Errorf("--%s=%v: must not be negative", DrainTimeoutFlag, drainTimeout)
	}
	gates := opts.ComponentGlobalsRegistry.FeatureGateFor(basecompatibility.DefaultKubeComponent)
	if err := logsapi.ValidateAndApply(opts.Logs, gates); err != nil {
		return err
	}
	cliflag.PrintFlags(cmd.Flags())
	if opts.InformerName == nil {
		name, err := cache.NewInformerName("kube-scheduler")
		if err != nil {
			return err
		}
		opts.InformerName = name
	}

	l := New(context.Background(), server.SetupSignalContext(), drainTimeout)
	cc, sched, err := app.Setup(l.Context(), opts, l.Registry()...)
	if err != nil {
		return err
	}
	l.Attach(sched)
	if mutable, ok := gates.(featuregate.MutableFeatureGate); ok {
		mutable.AddMetrics()
	}
	opts.ComponentGlobalsRegistry.AddMetrics()
	return app.Run(l.Context(), cc, sched)
}
