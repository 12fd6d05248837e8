package sandbox

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"sort"

	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	"k8s.io/component-base/featuregate"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/cmd/kube-scheduler/app"
	schedulerconfig "k8s.io/kubernetes/cmd/kube-scheduler/app/config"
	"k8s.io/kubernetes/cmd/kube-scheduler/app/options"
	"k8s.io/kubernetes/pkg/scheduler"

	"github.com/phalanx-sched/phalanx/pkg/debugapi"
	"github.com/phalanx-sched/phalanx/pkg/graceful"
	"github.com/phalanx-sched/phalanx/pkg/groupcache"
	"github.com/phalanx-sched/phalanx/pkg/inspect"
	"github.com/phalanx-sched/phalanx/pkg/plugins"
	"github.com/phalanx-sched/phalanx/pkg/plugins/gang"
	"github.com/phalanx-sched/phalanx/pkg/plugins/pluginrt"
)

// Scheduler is a kube-scheduler running inside this process with the same
// plugin registry as cmd/phalanx-scheduler.
type Scheduler struct {
	life *graceful.Lifecycle
	// term starts a graceful stop, as SIGTERM does in phalanx-scheduler.
	term     context.CancelFunc
	done     chan struct{}
	sched    *scheduler.Scheduler
	informer informers.SharedInformerFactory
	// diagnostics is where /debug/phalanx is served, when it is.
	diagnostics *debugapi.Endpoint
}

// Diagnostics returns where the scheduler serves /debug/phalanx (the
// address and the certificate authority of its self-signed certificate),
// nil unless it was started with a diagnostics kubeconfig.
func (s *Scheduler) Diagnostics() *debugapi.Endpoint { return s.diagnostics }

// SchedulerOptions configure StartSchedulerWith.
type SchedulerOptions struct {
	// DiagnosticsKubeconfig, when set, makes the scheduler serve
	// /debug/phalanx over HTTPS on a free loopback port, authenticating
	// and authorizing callers through the API server this kubeconfig
	// reaches (TokenReview, SubjectAccessReview), as phalanx-scheduler's
	// --phalanx-port does.
	DiagnosticsKubeconfig string
}

// AssumedPods returns, as namespace/name -> node, the pods the scheduler
// has assumed onto a node but not yet seen bound by the API server: members
// waiting in Permit and pods being bound. It reads the scheduler's cache,
// for tests that check nothing stays assumed.
func (s *Scheduler) AssumedPods() map[string]string {
	dump := s.sched.Cache.Dump()
	out := map[string]string{}
	for name, ni := range dump.Nodes {
		for _, pi := range ni.GetPods() {
			pod := pi.GetPod()
			if dump.AssumedPods.Has(string(pod.UID)) {
				out[pod.Namespace+"/"+pod.Name] = name
			}
		}
	}
	return out
}

// WaitingPods returns the namespace/name of every pod waiting in Permit, in
// any profile, sorted.
func (s *Scheduler) WaitingPods() []string {
	var out []string
	for _, prof := range s.sched.Profiles {
		prof.IterateOverWaitingPods(func(wp fwk.WaitingPod) {
			out = append(out, wp.GetPod().Namespace+"/"+wp.GetPod().Name)
		})
	}
	sort.Strings(out)
	return out
}

// NominatedPods returns, by node, the namespace/name of the pods the
// scheduler holds nominated there (room promised to them, in memory and in
// status.nominatedNodeName), in any profile, sorted.
func (s *Scheduler) NominatedPods(nodes []string) map[string][]string {
	out := map[string][]string{}
	for _, prof := range s.sched.Profiles {
		for _, node := range nodes {
			for _, pi := range prof.NominatedPodsForNode(node) {
				out[node] = append(out[node], pi.GetPod().Namespace+"/"+pi.GetPod().Name)
			}
		}
		break // all profiles share one nominator
	}
	for _, pods := range out {
		sort.Strings(pods)
	}
	return out
}

// SchedulerNames returns the schedulerNames the scheduler serves, one per
// profile, sorted.
func (s *Scheduler) SchedulerNames() []string {
	var names []string
	for name := range s.sched.Profiles {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

// InformerFactory is the scheduler's shared informer factory.
func (s *Scheduler) InformerFactory() informers.SharedInformerFactory { return s.informer }

// Groups is the group cache the scheduler's plugins share; false once the
// scheduler has stopped.
func (s *Scheduler) Groups() (*groupcache.Fed, bool) { return s.life.Plugins().Groups() }

// Stop ends the scheduler at once, as SIGKILL would (binding requests in
// flight are abandoned), and waits until its loop has returned.
func (s *Scheduler) Stop() {
	s.life.Kill()
	s.term()
	<-s.done
}

// Terminate stops the scheduler as SIGTERM stops phalanx-scheduler: no
// more cycles, then a wait of at most drainTimeout for the binds it let
// through Permit. It returns once the scheduler has stopped, with what
// the drain achieved.
func (s *Scheduler) Terminate() gang.DrainReport {
	s.term()
	<-s.done
	return s.life.Stop()
}

// DrainTimeout is how long Terminate waits for binds; phalanx-scheduler's
// default.
var DrainTimeout = graceful.DefaultDrainTimeout

// StartScheduler runs a Phalanx scheduler configured by the
// KubeSchedulerConfiguration file at configPath, whose
// clientConnection.kubeconfig points at the cluster. It returns once
// informers have synced.
func StartScheduler(ctx context.Context, configPath string) (*Scheduler, error) {
	return StartSchedulerWith(ctx, configPath, SchedulerOptions{})
}

// StartSchedulerWith is StartScheduler with options.
func StartSchedulerWith(ctx context.Context, configPath string, so SchedulerOptions) (*Scheduler, error) {
	// The defaults cmd/phalanx-scheduler runs with; the gates they touch
	// are the scheduler's alone, not the API server's it shares the
	// process with.
	if err := plugins.ApplyFeatureDefaults(); err != nil {
		return nil, err
	}
	// The API server of a sandbox may run with the upstream workload gates
	// on (it must, to keep pod.spec.schedulingGroup and serve
	// scheduling.k8s.io), while the scheduler must run with them off, as
	// phalanx-scheduler does: with GenericWorkload on, kube-scheduler's own
	// queue takes every pod with spec.schedulingGroup into upstream's
	// pod-group cycle, and Phalanx's plugins refuse to start. The gates
	// are process-global, so they are off only while the scheduler is
	// built; its queue, cache and event handlers read them then.
	restore := map[string]bool{}
	for gate := range workloadGatesOff() {
		restore[gate] = utilfeature.DefaultFeatureGate.Enabled(featuregate.Feature(gate))
	}
	if err := utilfeature.DefaultMutableFeatureGate.SetFromMap(workloadGatesOff()); err != nil {
		return nil, fmt.Errorf("turn workload gates off for the scheduler: %w", err)
	}
	defer func() { _ = utilfeature.DefaultMutableFeatureGate.SetFromMap(restore) }()
	opts := options.NewOptions()
	opts.ConfigFile = configPath
	// No health/metrics port in-process: several schedulers may share it.
	// The diagnostics, when asked for, get a free port of their own.
	opts.SecureServing = nil
	if so.DiagnosticsKubeconfig != "" {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("listen for diagnostics: %w", err)
		}
		opts.SecureServing = options.NewOptions().SecureServing
		opts.SecureServing.BindAddress = net.ParseIP("127.0.0.1")
		opts.SecureServing.BindPort = l.Addr().(*net.TCPAddr).Port
		opts.SecureServing.Listener = l
		opts.Authentication.RemoteKubeConfigFile = so.DiagnosticsKubeconfig
		opts.Authorization.RemoteKubeConfigFile = so.DiagnosticsKubeconfig
	}
	if opts.InformerName == nil {
		name, err := cache.NewInformerName(fmt.Sprintf("phalanx-sandbox-%s", filepath.Base(configPath)))
		if err == nil {
			opts.InformerName = name
		}
	}

	term, stop := context.WithCancel(context.Background())
	life := graceful.New(ctx, term, DrainTimeout)
	ctx, cancel := life.Context(), life.Kill
	cc, sched, err := app.Setup(ctx, opts, life.Registry()...)
	if err != nil {
		cancel()
		stop()
		return nil, fmt.Errorf("set up scheduler from %s: %w", configPath, err)
	}
	life.Attach(sched)
	gang.QuietMemberEvents(life.Plugins(), sched.Profiles)
	if err := gang.TrimGroupEvents(life.Plugins(), sched.Profiles, cc.DynInformerFactory); err != nil {
		cancel()
		stop()
		return nil, err
	}
	cc.EventBroadcaster.StartRecordingToSink(ctx.Done())
	cc.InformerFactory.Start(ctx.Done())
	if cc.DynInformerFactory != nil {
		cc.DynInformerFactory.Start(ctx.Done())
	}
	cc.InformerFactory.WaitForCacheSync(ctx.Done())
	if cc.DynInformerFactory != nil {
		cc.DynInformerFactory.WaitForCacheSync(ctx.Done())
	}
	if err := sched.WaitForHandlersSync(ctx); err != nil {
		cancel()
		stop()
		return nil, fmt.Errorf("scheduler handlers did not sync: %w", err)
	}
	life.Plugins().MarkListed()
	s := &Scheduler{life: life, term: stop, done: make(chan struct{}), sched: sched, informer: cc.InformerFactory}
	if cc.SecureServing != nil {
		if s.diagnostics, err = serveDiagnostics(ctx, life.Plugins(), cc, sched); err != nil {
			cancel()
			stop()
			return nil, err
		}
	}
	go func() {
		defer close(s.done)
		defer cc.EventBroadcaster.Shutdown()
		defer cc.InformerFactory.Shutdown()
		sched.Run(ctx)
		klog.FromContext(ctx).V(2).Info("sandbox scheduler stopped")
	}()
	return s, nil
}

// serveDiagnostics serves /debug/phalanx on the secure port cc carries,
// behind its authentication and authorization: the sandbox runs no other
// endpoint there.
func serveDiagnostics(ctx context.Context, rt *pluginrt.Runtime, cc *schedulerconfig.CompletedConfig, sched *scheduler.Scheduler) (*debugapi.Endpoint, error) {
	in, err := inspect.New(ctx, rt, cc.ComponentConfig.Profiles, sched, inspect.Options{Identity: "sandbox", Parallelism: int(cc.ComponentConfig.Parallelism), Filters: plugins.FilterPlugins(rt)})
	if err != nil {
		return nil, err
	}
	h := inspect.Secure(in.Handler(), cc.Authentication.Authenticator, cc.Authorization.Authorizer)
	if err := inspect.Serve(ctx, cc.SecureServing, cc.SecureServing.Listener, h); err != nil {
		return nil, err
	}
	cert, _ := cc.SecureServing.Cert.CurrentCertKeyContent()
	return &debugapi.Endpoint{Server: "https://" + cc.SecureServing.Listener.Addr().String(), CertificateAuthorityData: cert}, nil
}
