// Command phalanx-controller runs the Phalanx controllers (pkg/controller):
// group objects for every Workload, the batch/v1 Job integration, the
// member counters of PodGroup status, and the status (phase and counters)
// of scheduler-plugins' PodGroups where their CRD is served, and, with
// --provisioning-schedulers, ProvisioningRequests for gangs that ask a
// cluster autoscaler for their nodes. Replicas elect one leader through a
// Lease; the others stand by.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/spf13/pflag"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	restclient "k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	_ "k8s.io/component-base/metrics/prometheus/clientgo" // REST client, workqueue and leader-election metrics
	"k8s.io/klog/v2"
	xversioned "sigs.k8s.io/scheduler-plugins/pkg/generated/clientset/versioned"

	"github.com/phalanx-sched/phalanx/pkg/controller"
	"github.com/phalanx-sched/phalanx/pkg/generated/clientset/versioned"
	"github.com/phalanx-sched/phalanx/pkg/provisioning"
	"github.com/phalanx-sched/phalanx/pkg/version"
)

const (
	leaseName     = "phalanx-controller"
	leaseDuration = 15 * time.Second
	renewDeadline = 10 * time.Second
	retryPeriod   = 2 * time.Second
)

type flags struct {
	kubeconfig     string
	leaderElect    bool
	leaseNamespace string
	healthAddr     string
	metrics        *metricsServing
	workers        int
	// provisioning: the scheduler profiles whose opted-in gangs get
	// ProvisioningRequests; empty leaves it off.
	provisioningSchedulers []string
	provisioningAfter      time.Duration
	provisioningBackoff    time.Duration
	provisioningBackoffMax time.Duration
}

func main() {
	var f flags
	fs := pflag.NewFlagSet("phalanx-controller", pflag.ExitOnError)
	fs.StringVar(&f.kubeconfig, "kubeconfig", "", "path to a kubeconfig; the in-cluster configuration when empty")
	fs.BoolVar(&f.leaderElect, "leader-elect", true, "elect one active replica through a Lease before running the controllers")
	fs.StringVar(&f.leaseNamespace, "leader-elect-namespace", "phalanx-system", "namespace of the leader-election Lease "+leaseName)
	fs.StringVar(&f.healthAddr, "health-addr", ":8081", "address serving /healthz and /readyz")
	f.metrics = newMetricsServing()
	f.metrics.addFlags(fs)
	fs.IntVar(&f.workers, "workers", 4, "keys each controller reconciles concurrently")
	fs.StringSliceVar(&f.provisioningSchedulers, "provisioning-schedulers", nil,
		"schedulerNames (profiles) whose gangs may ask a cluster autoscaler for their nodes through one ProvisioningRequest "+
			"(autoscaling.x-k8s.io/v1, atomic class) when the group is annotated scheduling.phalanx.dev/provisioning: atomic; empty: off")
	fs.DurationVar(&f.provisioningAfter, "provisioning-after", 10*time.Second, "how long a gang must have been short of capacity before it asks")
	fs.DurationVar(&f.provisioningBackoff, "provisioning-backoff", time.Minute, "wait after a group's first failed ProvisioningRequest; doubles with each further failure")
	fs.DurationVar(&f.provisioningBackoffMax, "provisioning-backoff-max", 30*time.Minute, "longest wait between a group's ProvisioningRequests")
	printVersion := fs.Bool("version", false, "print the version and commit, and exit")
	klogFlags := flag.NewFlagSet("klog", flag.ExitOnError)
	klog.InitFlags(klogFlags)
	fs.AddGoFlagSet(klogFlags)
	_ = fs.Parse(os.Args[1:])
	if *printVersion {
		fmt.Println(version.String("phalanx-controller"))
		return
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, f); err != nil {
		klog.ErrorS(err, "phalanx-controller failed")
		klog.Flush()
		os.Exit(1)
	}
}

func run(ctx context.Context, f flags) error {
	logger := klog.FromContext(ctx)
	cfg, err := clientcmd.BuildConfigFromFlags("", f.kubeconfig)
	if err != nil {
		return fmt.Errorf("load kubeconfig: %w", err)
	}
	cfg = restclient.AddUserAgent(cfg, "phalanx-controller")
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	// CRDs are served as JSON only.
	crdCfg := restclient.CopyConfig(cfg)
	crdCfg.ContentType = "application/json"
	crdCfg.AcceptContentTypes = "application/json"
	phalanx, err := versioned.NewForConfig(crdCfg)
	if err != nil {
		return err
	}
	// scheduler-plugins' PodGroups: their status is kept while the API
	// server serves their CRD.
	x, err := xversioned.NewForConfig(crdCfg)
	if err != nil {
		return err
	}
	opts := controller.Options{Workers: f.workers, SchedulerPlugins: x}
	if len(f.provisioningSchedulers) > 0 {
		if f.provisioningAfter <= 0 || f.provisioningBackoff <= 0 || f.provisioningBackoffMax < f.provisioningBackoff {
			return errors.New("--provisioning-after and --provisioning-backoff must be positive and --provisioning-backoff-max at least --provisioning-backoff")
		}
		dyn, err := dynamic.NewForConfig(crdCfg)
		if err != nil {
			return err
		}
		opts.Provisioning = &controller.ProvisioningOptions{
			Client:         dyn,
			SchedulerNames: f.provisioningSchedulers,
			After:          f.provisioningAfter,
			Backoff:        provisioning.Backoff{Initial: f.provisioningBackoff, Max: f.provisioningBackoffMax},
		}
	}
	ctrls, err := controller.New(kube, phalanx, opts)
	if err != nil {
		return err
	}

	// Readiness: a standby replica is ready (it is healthy and waiting its
	// turn); the leader is ready once its caches have synced.
	var leading atomic.Bool
	watchdog := leaderelection.NewLeaderHealthzAdaptor(20 * time.Second)
	health := http.NewServeMux()
	health.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		if err := watchdog.Check(r); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		_, _ = w.Write([]byte("ok"))
	})
	health.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if leading.Load() && !ctrls.HasSynced() {
			http.Error(w, "informer caches have not synced", http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok"))
	})
	// /metrics is on the secure port (--secure-port, HTTPS), behind
	// delegated authentication and authorization.
	if err := f.metrics.start(f.kubeconfig, ctx.Done()); err != nil {
		return err
	}
	errs := make(chan error, 4)
	for _, s := range []*http.Server{
		{Addr: f.healthAddr, Handler: health, ReadHeaderTimeout: 5 * time.Second},
	} {
		go func() {
			if err := s.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
				errs <- fmt.Errorf("serve %s: %w", s.Addr, err)
			}
		}()
		go func() {
			<-ctx.Done()
			shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = s.Shutdown(shutdown)
		}()
	}

	runControllers := func(ctx context.Context) {
		leading.Store(true)
		if err := ctrls.Start(ctx); err != nil {
			errs <- err
			return
		}
		logger.Info("Phalanx controllers running")
		<-ctx.Done()
	}

	if !f.leaderElect {
		go runControllers(ctx)
		return wait(ctx, errs)
	}

	hostname, err := os.Hostname()
	if err != nil {
		return err
	}
	id := hostname + "_" + string(uuid.NewUUID())
	electorCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Name: leaseName, Namespace: f.leaseNamespace},
		Client:     kube.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: id},
	}
	elector, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:            lock,
		LeaseDuration:   leaseDuration,
		RenewDeadline:   renewDeadline,
		RetryPeriod:     retryPeriod,
		ReleaseOnCancel: true,
		WatchDog:        watchdog,
		Name:            leaseName,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: runControllers,
			OnStoppedLeading: func() {
				if electorCtx.Err() == nil {
					// Another replica may already be writing: stop at once
					// rather than race it, and let the restart stand by.
					errs <- errors.New("lost the leader-election lease")
				}
			},
			OnNewLeader: func(identity string) {
				if identity != id {
					logger.Info("Standing by", "leader", identity)
				}
			},
		},
	})
	if err != nil {
		return fmt.Errorf("leader election: %w", err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		elector.Run(electorCtx)
	}()
	err = wait(ctx, errs)
	// Give the Lease back on the way out, so a standby takes over now
	// rather than when the lease expires.
	cancel()
	select {
	case <-done:
	case <-time.After(renewDeadline):
	}
	return err
}

// wait blocks until the process is told to stop or something fails.
func wait(ctx context.Context, errs <-chan error) error {
	select {
	case <-ctx.Done():
		return nil
	case err := <-errs:
		return err
	}
}
