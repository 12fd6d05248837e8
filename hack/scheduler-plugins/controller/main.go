// Command controller is scheduler-plugins' PodGroup controller
// (sigs.k8s.io/scheduler-plugins v0.34.7 pkg/controllers): it keeps each
// scheduling.x-k8s.io PodGroup's status (phase, running, succeeded, failed,
// occupiedBy) up to date from its pods. The Coscheduling plugin does not
// read that status; a scheduler-plugins installation runs the controller
// beside the scheduler, so the bench arm does too, for the same API load.
//
// Unlike that project's cmd/controller it starts only the PodGroup
// reconciler (not the ElasticQuota one, whose CRD the bench does not
// install), and takes the client rate limits and listen
// addresses as flags.
package main

import (
	"flag"
	"fmt"
	"os"

	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"
	"sigs.k8s.io/scheduler-plugins/pkg/controllers"
)

func main() {
	// The defaults are what that project's controller runs with:
	// controller-runtime's client without a client-side rate limit, one
	// reconcile at a time.
	qps := flag.Float64("qps", -1, "client QPS to the API server (-1: no client-side limit)")
	burst := flag.Int("burst", 30, "client burst to the API server (with a QPS limit)")
	workers := flag.Int("workers", 1, "concurrent PodGroup reconciles")
	metricsAddr := flag.String("metrics-bind-address", "0", "metrics listen address (0: off)")
	probeAddr := flag.String("health-probe-bind-address", "0", "healthz/readyz listen address (0: off)")
	// --kubeconfig is controller-runtime's own flag (default: $KUBECONFIG,
	// then in-cluster).
	klog.InitFlags(nil)
	flag.Parse()
	if err := run(float32(*qps), *burst, *workers, *metricsAddr, *probeAddr); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func run(qps float32, burst, workers int, metricsAddr, probeAddr string) error {
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("client config: %w", err)
	}
	cfg.QPS, cfg.Burst = qps, burst

	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return err
	}
	if err := schedv1alpha1.AddToScheme(scheme); err != nil {
		return err
	}
	ctrl.SetLogger(klog.NewKlogr())
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 scheme,
		Metrics:                metricsserver.Options{BindAddress: metricsAddr},
		HealthProbeBindAddress: probeAddr,
	})
	if err != nil {
		return fmt.Errorf("controller manager: %w", err)
	}
	r := &controllers.PodGroupReconciler{Client: mgr.GetClient(), Scheme: mgr.GetScheme(), Workers: workers}
	if err := r.SetupWithManager(mgr); err != nil {
		return fmt.Errorf("PodGroup controller: %w", err)
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		return err
	}
	return mgr.Start(ctrl.SetupSignalHandler())
}
