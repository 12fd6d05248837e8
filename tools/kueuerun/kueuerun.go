// Package kueuerun runs Kueue's own controller manager (sigs.k8s.io/kueue,
// its exported packages, wired as Kueue's cmd/kueue wires them) against
// any API server, for the sandbox and the integration tests.
//
// It must run in a process of its own: Kueue registers its feature gates
// (DynamicResourceAllocation among them, with a spec of its own) in the
// process-wide gate that kube-apiserver and kube-scheduler register theirs
// in, and the second registration panics at init. So nothing that links
// k8s.io/kubernetes/pkg/features (tools/sandbox, the scheduler) may import
// this package; tools/cmd/phalanx-kueue is its one main, and the sandbox
// starts that binary as a child process.
//
// What differs from Kueue's own deployment: no leader election, no metrics
// or health servers, no visibility API server, no MultiKueue, and the
// webhook server listens on a loopback port with a certificate this package
// makes, its webhook configurations registered by URL instead of through a
// Service. The CRDs and the webhook configurations are read from Kueue's
// module directory, as Kueue ships them.
package kueuerun

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	configapi "sigs.k8s.io/kueue/apis/config/v1beta2"
	kueuev1beta1 "sigs.k8s.io/kueue/apis/kueue/v1beta1"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	qcache "sigs.k8s.io/kueue/pkg/cache/queue"
	schdcache "sigs.k8s.io/kueue/pkg/cache/scheduler"
	"sigs.k8s.io/kueue/pkg/config"
	"sigs.k8s.io/kueue/pkg/constants"
	"sigs.k8s.io/kueue/pkg/controller/core"
	"sigs.k8s.io/kueue/pkg/controller/core/indexer"
	"sigs.k8s.io/kueue/pkg/controller/jobframework"
	"sigs.k8s.io/kueue/pkg/controller/tas"
	tasindexer "sigs.k8s.io/kueue/pkg/controller/tas/indexer"
	"sigs.k8s.io/kueue/pkg/features"
	"sigs.k8s.io/kueue/pkg/metrics"
	"sigs.k8s.io/kueue/pkg/scheduler"
	preemptexpectations "sigs.k8s.io/kueue/pkg/scheduler/preemption/expectations"
	"sigs.k8s.io/kueue/pkg/scheduler/preemption/fairsharing"
	"sigs.k8s.io/kueue/pkg/util/kubeversion"
	"sigs.k8s.io/kueue/pkg/webhooks"

	// The job integrations this build serves. Kueue's umbrella package
	// (pkg/controller/jobs) cannot be linked: its TrainJob integration
	// needs a Kubeflow Trainer that does not build against Kubernetes
	// v1.37 (see go.mod).
	_ "sigs.k8s.io/kueue/pkg/controller/jobs/job"
	_ "sigs.k8s.io/kueue/pkg/controller/jobs/jobset"
	_ "sigs.k8s.io/kueue/pkg/controller/jobs/kubeflow/jobs/pytorchjob"
)

// Frameworks are the job integrations Run enables: every one this build
// links.
var Frameworks = []string{"batch/job", "jobset.x-k8s.io/jobset", "kubeflow.org/pytorchjob"}

// Options configure Run.
type Options struct {
	// TAS turns Kueue's TopologyAwareScheduling feature gate on (Kueue's
	// default in v0.17) or off.
	TAS bool
	// ModuleDir is Kueue's module directory, where its CRDs and webhook
	// manifests are read; default: found through the go command.
	ModuleDir string
	// CertDir receives the webhook server's certificate; default: a
	// temporary directory.
	CertDir string
	// Ready, when set, is called once the manager serves: CRDs
	// established, webhooks registered and answering, caches synced.
	Ready func()
}

func newScheme() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{
		clientgoscheme.AddToScheme, schedulingv1.AddToScheme, resourceapi.AddToScheme,
		kueue.AddToScheme, kueuev1beta1.AddToScheme, configapi.AddToScheme,
	} {
		if err := add(s); err != nil {
			return nil, err
		}
	}
	err := jobframework.ForEachIntegration(func(_ string, cb jobframework.IntegrationCallbacks) error {
		if cb.AddToScheme != nil {
			return cb.AddToScheme(s)
		}
		return nil
	})
	return s, err
}

// Namespace is where Kueue "is deployed": its events and leases would go
// there, and Kueue refuses to manage jobs in it.
const Namespace = "kueue-system"

// Run installs Kueue's CRDs and webhooks and runs its manager until ctx
// ends.
func Run(ctx context.Context, kubeConfig *rest.Config, opts Options) error {
	if err := utilfeature.DefaultMutableFeatureGate.SetFromMap(map[string]bool{
		string(features.TopologyAwareScheduling): opts.TAS,
		// The visibility API is an aggregated API server of its own.
		string(features.VisibilityOnDemand): false,
		string(features.MultiKueue):         false,
	}); err != nil {
		return err
	}
	if opts.ModuleDir == "" {
		dir, err := ModuleDir(ctx)
		if err != nil {
			return err
		}
		opts.ModuleDir = dir
	}
	if opts.CertDir == "" {
		dir, err := os.MkdirTemp("", "phalanx-kueue-certs-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		opts.CertDir = dir
	}
	kubeConfig = rest.CopyConfig(kubeConfig)
	kubeConfig.QPS, kubeConfig.Burst = -1, 0 // as the sandbox's other components: no client throttling

	client, err := kubernetes.NewForConfig(kubeConfig)
	if err != nil {
		return err
	}
	if _, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: Namespace}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	if err := installCRDs(ctx, kubeConfig, filepath.Join(opts.ModuleDir, "config", "components", "crd", "bases")); err != nil {
		return err
	}
	caPEM, err := writeServingCert(opts.CertDir)
	if err != nil {
		return err
	}

	scheme, err := newScheme()
	if err != nil {
		return err
	}
	// Kueue's defaults, as its binary loads them without a config file,
	// then what the sandbox changes.
	options, cfg, err := config.Load(scheme, "")
	if err != nil {
		return err
	}
	cfg.Namespace = ptrTo(Namespace)
	cfg.Integrations.Frameworks = Frameworks
	cfg.InternalCertManagement = &configapi.InternalCertManagement{Enable: ptrTo(false)}
	cfg.LeaderElection.LeaderElect = ptrTo(false)
	options.LeaderElection = false
	options.Metrics.BindAddress = "0"
	options.HealthProbeBindAddress = "0"
	port, err := freePort()
	if err != nil {
		return err
	}
	options.WebhookServer = webhook.NewServer(webhook.Options{Host: "127.0.0.1", Port: port, CertDir: opts.CertDir})

	metrics.Register()
	mgr, err := ctrl.NewManager(kubeConfig, options)
	if err != nil {
		return fmt.Errorf("kueue manager: %w", err)
	}

	cacheOptions := []schdcache.Option{schdcache.WithPodsReadyTracking(false)}
	queueOptions := []qcache.Option{}
	if cfg.FairSharing != nil {
		cacheOptions = append(cacheOptions, schdcache.WithFairSharing(fairsharing.Enabled(cfg.FairSharing)))
	}
	cCache := schdcache.New(mgr.GetClient(), cacheOptions...)
	requeuer := qcache.NewRequeuer()
	if err := mgr.Add(requeuer); err != nil {
		return err
	}
	preemptions := preemptexpectations.New()
	queueOptions = append(queueOptions, qcache.WithPreemptionExpectations(preemptions))
	queues := qcache.NewManager(mgr.GetClient(), cCache, requeuer, queueOptions...)

	if err := indexer.Setup(ctx, mgr.GetFieldIndexer()); err != nil {
		return err
	}
	if opts.TAS {
		if err := tasindexer.SetupIndexes(ctx, mgr.GetFieldIndexer()); err != nil {
			return err
		}
	}
	if err := jobframework.SetupIndexes(ctx, mgr.GetFieldIndexer(), jobframework.WithEnabledFrameworks(cfg.Integrations.Frameworks)); err != nil {
		return err
	}

	dc, err := discovery.NewDiscoveryClientForConfig(kubeConfig)
	if err != nil {
		return err
	}
	versions := kubeversion.NewServerVersionFetcher(devVersionDiscovery{dc})
	if err := mgr.Add(versions); err != nil {
		return err
	}
	if err := versions.FetchServerVersion(); err != nil {
		return err
	}

	if failed, err := core.SetupControllers(mgr, queues, cCache, &cfg, nil, preemptions, nil); err != nil {
		return fmt.Errorf("kueue controller %s: %w", failed, err)
	}
	if opts.TAS {
		if failed, err := tas.SetupControllers(mgr, queues, cCache, &cfg, nil); err != nil {
			return fmt.Errorf("kueue TAS controller %s: %w", failed, err)
		}
	}
	nsSelector, err := metav1.LabelSelectorAsSelector(cfg.ManagedJobsNamespaceSelector)
	if err != nil {
		return err
	}
	log := ctrl.Log.WithName("kueue-setup")
	if err := jobframework.SetupControllers(ctx, mgr, log,
		jobframework.WithManageJobsWithoutQueueName(cfg.ManageJobsWithoutQueueName),
		jobframework.WithWaitForPodsReady(cfg.WaitForPodsReady),
		jobframework.WithKubeServerVersion(versions),
		jobframework.WithEnabledFrameworks(cfg.Integrations.Frameworks),
		jobframework.WithManagerName(constants.KueueName),
		jobframework.WithLabelKeysToCopy(cfg.Integrations.LabelKeysToCopy),
		jobframework.WithCache(cCache),
		jobframework.WithQueues(queues),
		jobframework.WithObjectRetentionPolicies(cfg.ObjectRetentionPolicies),
		jobframework.WithManagedJobsNamespaceSelector(nsSelector),
	); err != nil {
		return fmt.Errorf("kueue job integrations: %w", err)
	}
	if failed, err := webhooks.Setup(mgr, nil); err != nil {
		return fmt.Errorf("kueue webhook %s: %w", failed, err)
	}
	go queues.CleanUpOnContext(ctx)
	go cCache.CleanUpOnContext(ctx)
	//lint:ignore SA1019 Kueue's scheduler takes a recorder of the old events API, as Kueue's own main passes it.
	recorder := mgr.GetEventRecorderFor(constants.AdmissionName)
	if err := mgr.Add(scheduler.New(queues, cCache, mgr.GetClient(), recorder,
		scheduler.WithFairSharing(cfg.FairSharing),
		scheduler.WithPreemptionExpectations(preemptions),
	)); err != nil {
		return err
	}

	// Register the webhooks once the server answers, then report ready.
	if err := mgr.Add(readyRunnable(func(ctx context.Context) error {
		if err := waitServing(ctx, port); err != nil {
			return err
		}
		mux := mgr.GetWebhookServer().WebhookMux()
		if err := registerWebhooks(ctx, client, opts.ModuleDir, port, caPEM, mux); err != nil {
			return err
		}
		if !mgr.GetCache().WaitForCacheSync(ctx) {
			return errors.New("kueue caches did not sync")
		}
		if opts.Ready != nil {
			opts.Ready()
		}
		return nil
	})); err != nil {
		return err
	}
	return mgr.Start(ctx)
}

func ptrTo[T any](v T) *T { return &v }

// readyRunnable runs once after the manager starts; an error stops the
// manager.
type readyRunnable func(context.Context) error

func (r readyRunnable) Start(ctx context.Context) error {
	if err := r(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	<-ctx.Done()
	return nil
}

// NeedLeaderElection: false, so it runs although leader election is off
// (a runnable that needs it would wait for an election that never comes).
func (readyRunnable) NeedLeaderElection() bool { return false }

// trimmed returns s without surrounding space, for the go command's output.
func trimmed(b []byte) string { return strings.TrimSpace(string(b)) }
