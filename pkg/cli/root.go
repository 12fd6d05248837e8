// Package cli is kubectl phalanx, the kubectl plugin that asks a running
// Phalanx scheduler why a group is pending (explain), whether a group
// would fit before it is created (fit), and where every group stands
// (top). The answers come from the scheduler itself, over its
// /debug/phalanx endpoints (pkg/debugapi); this package only finds the
// scheduler, sends the question with the user's credentials and prints the
// answer.
package cli

import (
	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
)

// Options are the flags every command shares.
type Options struct {
	Config *genericclioptions.ConfigFlags
	genericiooptions.IOStreams
	Endpoint EndpointOptions
}

// NewCommand is kubectl-phalanx's root command.
func NewCommand(streams genericiooptions.IOStreams) *cobra.Command {
	o := &Options{Config: genericclioptions.NewConfigFlags(true), IOStreams: streams}
	cmd := &cobra.Command{
		Use:   "kubectl-phalanx",
		Short: "Ask the Phalanx scheduler about gangs: why pending, would it fit, where everything stands",
		Long: `kubectl phalanx asks the running Phalanx scheduler, over its authenticated
/debug/phalanx endpoint, with your kubeconfig's credentials. Its answers
come from the scheduler's own planner and view of the cluster.

  kubectl phalanx explain podgroup trainer     why is this gang pending?
  kubectl phalanx explain pod trainer-0        the same, for a pod's group
  kubectl phalanx fit -f gang.yaml             would this gang fit now, and where?
  kubectl phalanx top                          every group by state; free room per domain

The scheduler is found through --scheduler-url, else the kubeconfig's
cluster entry (extension phalanx.dev/scheduler, which the sandbox writes),
else the pod holding the scheduler's Lease (--scheduler-namespace,
--scheduler-lease). Callers need the ClusterRole phalanx-diagnostics, and
phalanx-diagnostics-fit for fit.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	o.Config.AddFlags(cmd.PersistentFlags())
	o.Endpoint.AddFlags(cmd.PersistentFlags())
	cmd.AddCommand(newExplainCommand(o), newFitCommand(o), newTopCommand(o))
	return cmd
}

// namespace is the namespace of the kubeconfig context or --namespace.
func (o *Options) namespace() (string, error) {
	ns, _, err := o.Config.ToRawKubeConfigLoader().Namespace()
	return ns, err
}
