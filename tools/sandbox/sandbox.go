// Package sandbox runs a whole control plane inside one process: embedded
// etcd, kube-apiserver with the Phalanx CRDs, simulated nodes, a node agent
// that marks bound pods Running, and the Phalanx scheduler. Tests, the
// `make run` demo and the benchmarks all use it, so no external binary is
// ever downloaded.
package sandbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"sync"

	"k8s.io/apimachinery/pkg/runtime"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/client-go/kubernetes"
	restclient "k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/component-base/featuregate"
	"sigs.k8s.io/yaml"

	"github.com/phalanx-sched/phalanx/config"
	"github.com/phalanx-sched/phalanx/pkg/controller"
	"github.com/phalanx-sched/phalanx/pkg/debugapi"
	"github.com/phalanx-sched/phalanx/pkg/generated/clientset/versioned"
	"github.com/phalanx-sched/phalanx/pkg/plugins/gang"
)

// Options configure a sandbox cluster. The zero value starts an empty
// cluster with no scheduler.
type Options struct {
	// Dir holds etcd data, certificates and the kubeconfig. A temporary
	// directory, removed on Stop, is used when empty.
	Dir string
	// KubeconfigPath is where the admin kubeconfig is written; default
	// <Dir>/kubeconfig. It is written last, once everything Start was
	// asked for serves (CRDs, nodes, devices, controllers, scheduler), and
	// atomically: whoever sees the file may use the cluster at once.
	KubeconfigPath string
	// Topology, when set, creates simulated nodes.
	Topology *Topology
	// Devices, when set (with Topology), publishes DRA devices on every
	// simulated node, as PublishDevices does, before Start returns.
	Devices *Devices
	// Scheduler starts the Phalanx scheduler in-process.
	Scheduler bool
	// SchedulerConfig is the KubeSchedulerConfiguration to run; default
	// config/second-scheduler.yaml. Its clientConnection and leader election
	// are overridden for the sandbox.
	SchedulerConfig []byte
	// AlsoDefaultScheduler makes Phalanx serve schedulerName
	// default-scheduler too (the sandbox runs no other scheduler).
	AlsoDefaultScheduler bool
	// Diagnostics makes the scheduler serve /debug/phalanx (kubectl
	// phalanx) on a free loopback port, and writes where into the
	// kubeconfig (debugapi.KubeconfigExtension).
	Diagnostics bool
	// NodeAgent marks bound pods Running and completes their deletion: at
	// once, or when the grace period ends for a pod that ignores SIGTERM
	// (IgnoreSIGTERMAnnotation).
	NodeAgent bool
	// Controllers runs the Phalanx controllers (pkg/controller), upstream's
	// Job controller and the garbage collector in-process.
	Controllers bool
	// ClaimController runs upstream's resourceclaim controller alone,
	// without the rest of Controllers (which includes it): pods' claims
	// from ResourceClaimTemplates get created, and nothing else writes.
	ClaimController bool
	// ExtraGates are feature gates set, besides the workload gates, for
	// the API server and every in-process component (feature gates are
	// process-wide): for example an alpha DRA gate a workload needs. Stop
	// puts them back as they were.
	ExtraGates map[string]bool
	// ExtraAPIs are group/versions the API server serves besides its
	// defaults, e.g. resource.k8s.io/v1beta2 for objects written in it.
	ExtraAPIs []string
	// NoUpstreamWorkloadAPI keeps scheduling.k8s.io/v1beta1 workload
	// feature gates at their defaults (off).
	NoUpstreamWorkloadAPI bool
	// JobWorkloads turns on upstream's WorkloadWithJob gate: the API server
	// accepts a Job's spec.scheduling, and the in-process Job controller
	// (Controllers) creates a scheduling.k8s.io Workload and PodGroup for
	// every Job without a controller owner and attaches its pods through
	// spec.schedulingGroup, as on a cluster that turns it on. Off by
	// default because it then does so for every Job, Phalanx's own gang
	// Jobs included.
	JobWorkloads bool
	// AuthorizationMode for kube-apiserver; default RBAC. The admin
	// kubeconfig is system:masters either way.
	AuthorizationMode string
	// DisableAdmission names admission plugins to turn off besides those
	// the sandbox always turns off. Upstream's scheduler_perf runs its
	// API server without Priority, so that its pod templates may set
	// spec.priority without a PriorityClass.
	DisableAdmission []string
	// SchedulerPluginsCRD installs scheduler-plugins' scheduling.x-k8s.io
	// PodGroup CRD before the scheduler and controllers start, so they
	// find the dialect served from the start.
	SchedulerPluginsCRD bool
	// ExtraSchedulerNames makes Phalanx also serve these schedulerNames,
	// with the first profile's plugins: jobs whose operator names another
	// scheduler (KubeRay names scheduler-plugins-scheduler) are scheduled
	// unchanged.
	ExtraSchedulerNames []string
	// Provisioning turns on phalanx-controller's ProvisioningRequests for
	// opted-in gangs (Controllers runs it); its Client is filled in. The
	// copy of the autoscaler's ProvisioningRequest CRD is installed
	// whenever this or StandInProvisioner is set.
	Provisioning *controller.ProvisioningOptions
	// StandInProvisioner runs a stand-in for the cluster autoscaler's
	// atomic provisioning class (provisioner.go), which adds the nodes
	// ProvisioningRequests ask for.
	StandInProvisioner *StandInProvisioner
	// Kueue, when set, runs Kueue's controller manager beside the
	// sandbox, started after the nodes and controllers (see Kueue).
	Kueue *Kueue
}

// Cluster is a running sandbox.
type Cluster struct {
	Config         *restclient.Config
	Client         kubernetes.Interface
	Phalanx        versioned.Interface
	Dir            string
	KubeconfigPath string

	// componentKubeconfig is the admin kubeconfig the in-process
	// components read while KubeconfigPath does not exist yet.
	componentKubeconfig string
	// ready is set once Start has written KubeconfigPath; a scheduler
	// restarted afterwards rewrites it with its diagnostics endpoint.
	ready bool

	opts      Options
	ctx       context.Context
	cancel    context.CancelFunc
	mu        sync.Mutex
	scheduler *Scheduler
	// schedulerConfig replaces opts.SchedulerConfig after RestartScheduler.
	schedulerConfig []byte
	stops           []func()
	// kueuePID is the Kueue child's process id (Options.Kueue).
	kueuePID int
	ownDir   bool
}

// Start brings up a cluster. Call Stop when done, also on error paths of
// the caller: Start cleans up after itself when it fails.
func Start(ctx context.Context, opts Options) (c *Cluster, err error) {
	ctx, cancel := context.WithCancel(ctx)
	c = &Cluster{opts: opts, ctx: ctx, cancel: cancel, Dir: opts.Dir}
	defer func() {
		if err != nil {
			c.Stop()
			c = nil
		}
	}()
	if c.Dir == "" {
		if c.Dir, err = os.MkdirTemp("", "phalanx-sandbox-"); err != nil {
			return c, err
		}
		c.ownDir = true
	} else if err = os.MkdirAll(c.Dir, 0o755); err != nil {
		return c, err
	}

	etcd, etcdURL, err := startEtcd(c.Dir)
	if err != nil {
		return c, err
	}
	c.stops = append(c.stops, etcd.Close)

	if opts.JobWorkloads && opts.NoUpstreamWorkloadAPI {
		return c, errors.New("JobWorkloads needs the upstream workload API: drop NoUpstreamWorkloadAPI")
	}
	// Every gate explicitly on or off: an earlier sandbox in this process
	// may have set them otherwise.
	gates := maps.Clone(UpstreamWorkloadGates)
	if opts.NoUpstreamWorkloadAPI {
		gates = workloadGatesOff()
	}
	gates[jobWorkloadsGate] = opts.JobWorkloads
	restore := map[string]bool{}
	for k, v := range opts.ExtraGates {
		if _, ours := gates[k]; ours {
			return c, fmt.Errorf("ExtraGates names %s, which the sandbox sets itself", k)
		}
		if !knownGate(k) {
			return c, fmt.Errorf("ExtraGates names %s, which is not a feature gate of this build", k)
		}
		restore[k] = utilfeature.DefaultFeatureGate.Enabled(featuregate.Feature(k))
		gates[k] = v
	}
	if len(restore) > 0 {
		c.stops = append(c.stops, func() { _ = utilfeature.DefaultMutableFeatureGate.SetFromMap(restore) })
	}
	authz := opts.AuthorizationMode
	if authz == "" {
		authz = "RBAC"
	}
	var apis []string
	for _, gv := range opts.ExtraAPIs {
		apis = append(apis, gv+"=true")
	}
	api, err := startAPIServer(ctx, c.Dir, etcdURL, gates, authz, opts.DisableAdmission, apis)
	if err != nil {
		return c, err
	}
	c.stops = append(c.stops, api.stop)
	c.Config = api.config

	c.KubeconfigPath = opts.KubeconfigPath
	if c.KubeconfigPath == "" {
		c.KubeconfigPath = filepath.Join(c.Dir, "kubeconfig")
	}
	// A user or script waits for KubeconfigPath to appear and then uses
	// the cluster, so the components started here read a kubeconfig of
	// their own, and KubeconfigPath is written at the very end.
	c.componentKubeconfig = filepath.Join(c.Dir, "components.kubeconfig")
	if err = WriteKubeconfig(c.Config, c.componentKubeconfig); err != nil {
		return c, err
	}
	if c.Client, err = kubernetes.NewForConfig(c.Config); err != nil {
		return c, err
	}
	// CRDs speak JSON only; the loopback config asks for protobuf.
	crdConfig := restclient.CopyConfig(c.Config)
	crdConfig.ContentType = "application/json"
	crdConfig.AcceptContentTypes = "application/json"
	if c.Phalanx, err = versioned.NewForConfig(crdConfig); err != nil {
		return c, err
	}
	if err = installCRDs(ctx, c.Config); err != nil {
		return c, err
	}
	if opts.SchedulerPluginsCRD {
		if err = InstallSchedulerPluginsCRD(ctx, c.Config); err != nil {
			return c, err
		}
	}
	if opts.Provisioning != nil || opts.StandInProvisioner != nil {
		if err = installProvisioningCRD(ctx, c.Config, c.Client); err != nil {
			return c, err
		}
	}
	if opts.StandInProvisioner != nil {
		if err = startStandInProvisioner(ctx, c.crdConfigFor("stand-in-provisioner"), c.clientFor("stand-in-provisioner"), *opts.StandInProvisioner); err != nil {
			return c, err
		}
	}
	if opts.Topology != nil {
		if err = CreateNodes(ctx, c.Client, opts.Topology.Nodes()); err != nil {
			return c, err
		}
		if opts.Devices != nil {
			if err = PublishDevices(ctx, c.Client, opts.Topology.Nodes(), *opts.Devices); err != nil {
				return c, fmt.Errorf("publish DRA devices: %w", err)
			}
		}
	} else if opts.Devices != nil {
		return c, errors.New("Devices needs a Topology whose nodes carry them")
	}
	if opts.NodeAgent {
		startNodeAgent(ctx, c.Client)
	}
	if opts.Controllers {
		if err = c.startControllers(ctx); err != nil {
			return c, err
		}
	} else if opts.ClaimController {
		if err = c.startClaimController(ctx); err != nil {
			return c, err
		}
	}
	if opts.Kueue != nil {
		if err = c.startKueue(ctx, *opts.Kueue); err != nil {
			return c, err
		}
	}
	if opts.Scheduler {
		if _, err = c.StartScheduler(ctx); err != nil {
			return c, err
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if err = c.writeUserKubeconfig(); err != nil {
		return c, err
	}
	c.ready = true
	return c, nil
}

// writeUserKubeconfig writes KubeconfigPath, with the running scheduler's
// diagnostics endpoint if it serves one. Callers hold c.mu.
func (c *Cluster) writeUserKubeconfig() error {
	var diag *debugapi.Endpoint
	if c.scheduler != nil {
		diag = c.scheduler.Diagnostics()
	}
	return writeKubeconfig(c.Config, c.KubeconfigPath, diag)
}

// StartScheduler starts (or restarts) the in-process Phalanx scheduler.
func (c *Cluster) StartScheduler(ctx context.Context) (*Scheduler, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.scheduler != nil {
		return nil, errors.New("a sandbox scheduler is already running; stop it first")
	}
	base := c.opts.SchedulerConfig
	if len(c.schedulerConfig) > 0 {
		base = c.schedulerConfig
	}
	if len(base) == 0 {
		base = config.SecondScheduler
	}
	path, err := c.writeSchedulerConfig(base)
	if err != nil {
		return nil, err
	}
	var so SchedulerOptions
	if c.opts.Diagnostics {
		so.DiagnosticsKubeconfig = c.componentKubeconfig
	}
	s, err := StartSchedulerWith(ctx, path, so)
	if err != nil {
		return nil, err
	}
	c.scheduler = s
	// Before Start is done, Start writes the kubeconfig itself, last.
	if c.ready && s.Diagnostics() != nil {
		if err := c.writeUserKubeconfig(); err != nil {
			s.Stop()
			c.scheduler = nil
			return nil, err
		}
	}
	return s, nil
}

// RestartScheduler stops the in-process scheduler and starts one that runs
// config, a KubeSchedulerConfiguration adapted as Options.SchedulerConfig
// is; nil goes back to Options.SchedulerConfig. The new scheduler lives as
// long as the sandbox, not as a caller's context, so a caller may restart
// it from a short-lived cleanup context. Scheduler restarts keep
// everything else (nodes, pods, groups).
func (c *Cluster) RestartScheduler(config []byte) error {
	c.StopScheduler()
	c.mu.Lock()
	c.schedulerConfig = config
	c.mu.Unlock()
	_, err := c.StartScheduler(c.ctx)
	return err
}

// Scheduler returns the running in-process scheduler, nil when stopped.
func (c *Cluster) Scheduler() *Scheduler {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.scheduler
}

// StopScheduler stops the in-process scheduler, as a crash would.
func (c *Cluster) StopScheduler() {
	c.mu.Lock()
	s := c.scheduler
	c.scheduler = nil
	c.mu.Unlock()
	if s != nil {
		s.Stop()
	}
}

// TerminateScheduler stops the in-process scheduler as SIGTERM stops
// phalanx-scheduler (Scheduler.Terminate) and reports the drain.
func (c *Cluster) TerminateScheduler() gang.DrainReport {
	c.mu.Lock()
	s := c.scheduler
	c.scheduler = nil
	c.mu.Unlock()
	if s == nil {
		return gang.DrainReport{}
	}
	return s.Terminate()
}

// writeSchedulerConfig adapts a deployable KubeSchedulerConfiguration to the
// sandbox: it points the client at the sandbox, lifts client throttling,
// turns leader election off and, if asked, serves default-scheduler too.
func (c *Cluster) writeSchedulerConfig(base []byte) (string, error) {
	var cfg map[string]interface{}
	if err := yaml.Unmarshal(base, &cfg); err != nil {
		return "", fmt.Errorf("parse scheduler config: %w", err)
	}
	cfg["clientConnection"] = map[string]interface{}{
		"kubeconfig": c.componentKubeconfig, "qps": 5000, "burst": 10000,
	}
	cfg["leaderElection"] = map[string]interface{}{"leaderElect": false}
	names := c.opts.ExtraSchedulerNames
	if c.opts.AlsoDefaultScheduler {
		names = append([]string{"default-scheduler"}, names...)
	}
	if len(names) > 0 {
		profiles, _ := cfg["profiles"].([]interface{})
		if len(profiles) == 0 {
			return "", errors.New("scheduler config has no profiles")
		}
		first, _ := profiles[0].(map[string]interface{})
		served := map[string]bool{}
		for _, p := range profiles {
			if name, ok := p.(map[string]interface{})["schedulerName"].(string); ok {
				served[name] = true
			} else {
				// kube-scheduler's default for a profile without a name.
				served["default-scheduler"] = true
			}
		}
		for _, name := range names {
			// A user's configuration may serve the name already
			// (replace-default): a second profile of it is invalid.
			if served[name] {
				continue
			}
			clone := map[string]interface{}{}
			for k, v := range first {
				clone[k] = v
			}
			clone["schedulerName"] = name
			profiles = append(profiles, clone)
		}
		cfg["profiles"] = profiles
	}
	out, err := yaml.Marshal(cfg)
	if err != nil {
		return "", err
	}
	f, err := os.CreateTemp(c.Dir, "scheduler-*.yaml")
	if err != nil {
		return "", err
	}
	defer f.Close()
	if _, err := f.Write(out); err != nil {
		return "", err
	}
	return f.Name(), nil
}

// Stop shuts everything down in reverse order and removes a temporary Dir.
func (c *Cluster) Stop() {
	c.StopScheduler()
	c.cancel()
	for i := len(c.stops) - 1; i >= 0; i-- {
		c.stops[i]()
	}
	c.stops = nil
	if c.ownDir {
		os.RemoveAll(c.Dir)
	}
}

// WriteKubeconfig writes an admin kubeconfig for cfg to path.
func WriteKubeconfig(cfg *restclient.Config, path string) error {
	return writeKubeconfig(cfg, path, nil)
}

// writeKubeconfig writes an admin kubeconfig, with where the scheduler
// serves its diagnostics when diag is set. It writes a temporary file
// beside path and renames it over path, so that a reader never sees a
// partly written file.
func writeKubeconfig(cfg *restclient.Config, path string, diag *debugapi.Endpoint) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	kc := clientcmdapi.NewConfig()
	kc.Clusters["sandbox"] = &clientcmdapi.Cluster{
		Server:                   cfg.Host,
		CertificateAuthorityData: cfg.TLSClientConfig.CAData,
		TLSServerName:            cfg.TLSClientConfig.ServerName,
	}
	if diag != nil {
		raw, err := json.Marshal(diag)
		if err != nil {
			return err
		}
		kc.Clusters["sandbox"].Extensions = map[string]runtime.Object{
			debugapi.KubeconfigExtension: &runtime.Unknown{Raw: raw, ContentType: runtime.ContentTypeJSON},
		}
	}
	kc.AuthInfos["admin"] = &clientcmdapi.AuthInfo{Token: cfg.BearerToken}
	kc.Contexts["phalanx-sandbox"] = &clientcmdapi.Context{Cluster: "sandbox", AuthInfo: "admin"}
	kc.CurrentContext = "phalanx-sandbox"
	data, err := clientcmd.Write(*kc)
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+"-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	// The file holds the admin token: readable by its owner only, as
	// clientcmd writes it.
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// knownGate reports whether gate is registered; Enabled panics on one
// that is not.
func knownGate(gate string) bool {
	_, ok := utilfeature.DefaultMutableFeatureGate.GetAll()[featuregate.Feature(gate)]
	return ok
}
