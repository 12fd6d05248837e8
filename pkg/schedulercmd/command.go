// Package schedulercmd is phalanx-scheduler's command: kube-scheduler's
// own flags, configuration and run loop with the Phalanx plugins, plus a
// graceful stop that drains gang binds (pkg/graceful) and the diagnostics
// endpoints kubectl phalanx asks (pkg/inspect).
//
// app.NewSchedulerCommand cannot be used for either: it cancels
// everything, Lease included, on the first signal and exits while binds are
// in flight, and it keeps its options and scheduler to itself.
//
// kube-scheduler v1.37's app package builds its secure handler inside
// app.Run (health, metrics, configz, flagz, statusz) and offers no way to
// add a path to it, and app.NewSchedulerCommand keeps its options and the
// scheduler it sets up to itself. So this package builds the command the
// way NewSchedulerCommand does, calls app.Setup and app.Run unchanged, and
// serves /debug/phalanx on a port of its own, --phalanx-port (10260), with
// the very certificate, authenticator and authorizer app.Run's secure port
// (10259) uses. Serving everything on 10259 would mean rebuilding
// upstream's handler here and keeping it in step at every upgrade.
package schedulercmd

import (
	"context"
	"fmt"
	"net"
	"os"
	"strconv"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/server"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/leaderelection"
	cliflag "k8s.io/component-base/cli/flag"
	"k8s.io/component-base/cli/globalflag"
	basecompatibility "k8s.io/component-base/compatibility"
	"k8s.io/component-base/featuregate"
	"k8s.io/component-base/logs"
	logsapi "k8s.io/component-base/logs/api/v1"
	"k8s.io/component-base/term"
	"k8s.io/component-base/version/verflag"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/cmd/kube-scheduler/app"
	"k8s.io/kubernetes/cmd/kube-scheduler/app/options"
	"k8s.io/kubernetes/pkg/scheduler"
	kubeschedulerconfig "k8s.io/kubernetes/pkg/scheduler/apis/config"

	"github.com/phalanx-sched/phalanx/pkg/graceful"
	"github.com/phalanx-sched/phalanx/pkg/inspect"
	"github.com/phalanx-sched/phalanx/pkg/plugins"
	"github.com/phalanx-sched/phalanx/pkg/plugins/gang"
	"github.com/phalanx-sched/phalanx/pkg/plugins/pluginrt"
	"github.com/phalanx-sched/phalanx/pkg/version"
)

// DefaultPort is where /debug/phalanx is served: beside kube-scheduler's
// 10259.
const DefaultPort = 10260

// DrainTimeoutFlag names the flag that bounds a graceful stop's wait.
const DrainTimeoutFlag = "bind-drain-timeout"

// NewCommand is phalanx-scheduler: kube-scheduler with the Phalanx plugins,
// a graceful stop on SIGTERM or SIGINT (a second signal exits at once) and
// the diagnostics port.
func NewCommand() *cobra.Command {
	opts := options.NewOptions()
	port := DefaultPort
	drainTimeout := graceful.DefaultDrainTimeout
	limits := inspect.DefaultLimits()
	cmd := &cobra.Command{
		Use: "phalanx-scheduler",
		Long: `phalanx-scheduler is kube-scheduler with the Phalanx plugins compiled in:
gang scheduling, groups of gangs, topology-aware placement of whole groups
and group-level preemption. It takes every kube-scheduler flag; enable the
plugins in the --config profile. It also serves /debug/phalanx for
kubectl phalanx (--phalanx-port), within limits on each request's size and
time and on how many are taken at once (--phalanx-max-*,
--phalanx-request-timeout).

On SIGTERM it stops scheduling, lets nothing more through Permit, and
waits up to --` + DrainTimeoutFlag + ` for the binds already let through,
so that a gang it was binding ends bound whole, while it still holds its
Lease; then it stops as kube-scheduler does.`,
		PersistentPreRunE: func(*cobra.Command, []string) error {
			// Feature gates must be set before RunE reads them.
			return opts.ComponentGlobalsRegistry.Set()
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			// Checked before anything starts: a bad limit is a typo to
			// fix, not something to find once the scheduler is running.
			if err := limits.Validate(); err != nil {
				return err
			}
			return run(cmd, opts, port, drainTimeout, limits)
		},
		Args: func(cmd *cobra.Command, args []string) error {
			for _, a := range args {
				if a != "" {
					return fmt.Errorf("%q does not take any arguments, got %q", cmd.CommandPath(), args)
				}
			}
			return nil
		},
	}
	nfs := opts.Flags
	verflag.AddFlags(nfs.FlagSet("global"))
	globalflag.AddGlobalFlags(nfs.FlagSet("global"), cmd.Name(), logs.SkipLoggingConfigurationFlags())
	pfs := nfs.FlagSet("phalanx")
	pfs.IntVar(&port, "phalanx-port", port,
		"HTTPS port of /debug/phalanx (kubectl phalanx explain, fit and top), on --bind-address, with the certificate, "+
			"authentication and authorization of --secure-port; callers need get on the non-resource URL /debug/phalanx/* "+
			"(ClusterRole phalanx-diagnostics), and post on /debug/phalanx/fit for fit (ClusterRole phalanx-diagnostics-fit). "+
			"0 turns it off, as does --secure-port=0.")
	pfs.DurationVar(&drainTimeout, DrainTimeoutFlag, drainTimeout,
		"On SIGTERM, how long to wait for the binds already let through Permit before stopping, so that no gang is left bound below its minimum. "+
			"Keep it below the pod's terminationGracePeriodSeconds. 0 stops at once.")
	pfs.Int64Var(&limits.MaxRequestBytes, inspect.FlagMaxRequestBytes, limits.MaxRequestBytes,
		"Largest request body /debug/phalanx takes, in bytes (a fit request needs a few KiB per pod); larger ones get 413.")
	pfs.IntVar(&limits.MaxFitPods, inspect.FlagMaxFitPods, limits.MaxFitPods,
		"Most pods one fit request may hold; the planner and the victim search run over all of them inside the scheduler. More get 413.")
	pfs.IntVar(&limits.MaxTopKeys, inspect.FlagMaxTopKeys, limits.MaxTopKeys,
		"Most node label keys one top request may ask for; more get 400.")
	pfs.DurationVar(&limits.RequestTimeout, inspect.FlagRequestTimeout, limits.RequestTimeout,
		"Longest a /debug/phalanx request may take, including its wait for the requests before it (they are answered one at a time); a slower one gets 503.")
	pfs.IntVar(&limits.MaxInFlight, inspect.FlagMaxRequestsInflight, limits.MaxInFlight,
		"Most /debug/phalanx requests answered or waiting at once; more get 429 with Retry-After.")
	for _, f := range nfs.FlagSets {
		cmd.Flags().AddFlagSet(f)
	}
	cols, _, _ := term.TerminalSize(cmd.OutOrStdout())
	cliflag.SetUsageAndHelpFunc(cmd, *nfs, cols)
	if err := cmd.MarkFlagFilename("config", "yaml", "yml", "json"); err != nil {
		klog.Background().Error(err, "Failed to mark flag filename")
	}
	return cmd
}

func run(cmd *cobra.Command, opts *options.Options, port int, drainTimeout time.Duration, limits inspect.Limits) error {
	// kube-scheduler's --version names only the Kubernetes release; this
	// binary is also a Phalanx release, which is what an operator asks.
	if f := cmd.Flags().Lookup("version"); f != nil && f.Value.String() != "false" {
		fmt.Println(version.String(cmd.Name()))
		os.Exit(0)
	}
	verflag.PrintAndExitIfRequested()
	if drainTimeout < 0 {
		return fmt.Errorf("--%s=%v: must not be negative", DrainTimeoutFlag, drainTimeout)
	}
	fg := opts.ComponentGlobalsRegistry.FeatureGateFor(basecompatibility.DefaultKubeComponent)
	if err := logsapi.ValidateAndApply(opts.Logs, fg); err != nil {
		fmt.Fprintf(os.Stderr, "%v\n", err)
		os.Exit(1)
	}
	cliflag.PrintFlags(cmd.Flags())
	if opts.InformerName == nil {
		name, err := cache.NewInformerName("kube-scheduler")
		if err != nil {
			return err
		}
		opts.InformerName = name
	}
	// The plugins would refuse bad args too, but only while the scheduler
	// builds its profiles, and without the field's path in the file.
	if opts.ConfigFile != "" {
		if cfg, err := options.LoadConfigFromFile(klog.Background(), opts.ConfigFile); err == nil {
			if errs := plugins.ValidateArgs(cfg); len(errs) > 0 {
				return fmt.Errorf("scheduler configuration %s is not valid: %w", opts.ConfigFile, errs.ToAggregate())
			}
		}
	}
	l := graceful.New(context.Background(), server.SetupSignalContext(), drainTimeout)
	ctx := l.Context()
	cc, sched, err := app.Setup(ctx, opts, l.Registry()...)
	if err != nil {
		return err
	}
	l.Attach(sched)
	gang.QuietMemberEvents(l.Plugins(), sched.Profiles)
	if err := gang.TrimGroupEvents(l.Plugins(), sched.Profiles, cc.DynInformerFactory); err != nil {
		return err
	}
	fg.(featuregate.MutableFeatureGate).AddMetrics()
	opts.ComponentGlobalsRegistry.AddMetrics()

	if port > 0 && cc.SecureServing != nil {
		in, err := newInspector(ctx, l.Plugins(), cc.ComponentConfig.Profiles, inspect.Options{Parallelism: int(cc.ComponentConfig.Parallelism), Limits: limits, Filters: plugins.FilterPlugins(l.Plugins())}, sched, cc.LeaderElection)
		if err != nil {
			return err
		}
		host, _, err := net.SplitHostPort(cc.SecureServing.Listener.Addr().String())
		if err != nil {
			return err
		}
		l, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(port)))
		if err != nil {
			return fmt.Errorf("listen on --phalanx-port: %w", err)
		}
		h := inspect.Secure(in.Handler(), cc.Authentication.Authenticator, cc.Authorization.Authorizer)
		if err := inspect.Serve(ctx, cc.SecureServing, l, h); err != nil {
			return err
		}
	}
	if !cc.ComponentConfig.DelayCacheUntilActive || cc.LeaderElection == nil {
		// app.Run would start the informers at once too (it defers them
		// only for a standby that delays its caches until it leads).
		cc.InformerFactory.Start(ctx.Done())
		syncDynamicInformers(ctx, cc.DynInformerFactory, gang.WatchedResources(l.Plugins(), sched.Profiles))
		cc.InformerFactory.WaitForCacheSync(ctx.Done())
		if waitHandlersSync(ctx, sched.WaitForHandlersSync) {
			l.Plugins().MarkListed()
		}
	} else {
		// A standby lists only once it leads, and may lead a cluster with
		// no pending pod: gang members are held from the start.
		l.Plugins().MarkListed()
	}
	return app.Run(ctx, cc, sched)
}

// handlersPoll is how often waitHandlersSync looks.
const handlersPoll = 5 * time.Millisecond

// waitHandlersSync waits until the scheduler's event handlers have taken
// in the informers' first lists, looking every handlersPoll. app.Run waits
// for the same with a check every 100ms: the handlers finish a few
// milliseconds after the informers, so its first check misses and the
// first cycle starts up to 100ms late, on every start; on a small cluster
// that is most of the time to the first gang. wait is the scheduler's
// WaitForHandlersSync, which checks once at once and then every 100ms: a
// short deadline makes it one check. Done here, app.Run's wait passes at
// its first check. A stop, or handlers not synced within a minute, are
// left to app.Run. It reports whether the handlers synced.
func waitHandlersSync(ctx context.Context, wait func(context.Context) error) bool {
	deadline := time.Now().Add(time.Minute)
	for ctx.Err() == nil && time.Now().Before(deadline) {
		check, cancel := context.WithTimeout(ctx, handlersPoll)
		err := wait(check)
		cancel()
		if err == nil {
			return true
		}
	}
	return false
}

// syncDynamicInformers starts the scheduler's dynamic informers of the
// custom resources its plugins watch and waits for their first list on
// their done channels.
//
// app.Run starts them too, but it waits for its dynamic informers with
// client-go's polling wait: one that has not listed at the first check
// costs the first scheduling cycle 100ms, on every start, which upstream
// kube-scheduler (no custom resources) does not pay. Synced here, while
// app.Run's typed informers list, they pass that first check. One that
// has not synced within a minute, or a stop meanwhile, is left to app.Run,
// which waits and stops as it would have.
func syncDynamicInformers(ctx context.Context, dyn dynamicinformer.DynamicSharedInformerFactory, gvrs []schema.GroupVersionResource) {
	if dyn == nil || len(gvrs) == 0 {
		return
	}
	checks := make([]cache.DoneChecker, len(gvrs))
	for i, gvr := range gvrs {
		checks[i] = dyn.ForResource(gvr).Informer().HasSyncedChecker()
	}
	dyn.Start(ctx.Done())
	syncCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	cache.WaitFor(syncCtx, "", checks...)
}

// newInspector builds the diagnostics of sched. With leader election, only
// the replica holding the Lease answers; the others point at it.
func newInspector(ctx context.Context, rt *pluginrt.Runtime, profiles []kubeschedulerconfig.KubeSchedulerProfile, opts inspect.Options, sched *scheduler.Scheduler, le *leaderelection.LeaderElectionConfig) (*inspect.Inspector, error) {
	if le == nil {
		opts.Identity, _ = os.Hostname()
		return inspect.New(ctx, rt, profiles, sched, opts)
	}
	lock := le.Lock
	opts.Identity = lock.Identity()
	opts.Leading = func(ctx context.Context) (bool, string, error) {
		rec, _, err := lock.Get(ctx)
		if err != nil {
			return false, "", err
		}
		return rec.HolderIdentity == opts.Identity, rec.HolderIdentity, nil
	}
	return inspect.New(ctx, rt, profiles, sched, opts)
}
