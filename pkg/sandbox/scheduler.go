package sandbox

import (
	"context"
	"fmt"
	"path/filepath"

	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/cmd/kube-scheduler/app"
	"k8s.io/kubernetes/cmd/kube-scheduler/app/options"

	"github.com/phalanx-sched/phalanx/pkg/plugins"
)

// Scheduler is a kube-scheduler running inside this process with the same
// plugin registry as cmd/phalanx-scheduler.
type Scheduler struct {
	cancel context.CancelFunc
	done   chan struct{}
}

// Stop cancels the scheduler and waits until its loop has returned.
func (s *Scheduler) Stop() {
	s.cancel()
	<-s.done
}

// StartScheduler runs a Phalanx scheduler configured by the
// KubeSchedulerConfiguration file at configPath, whose
// clientConnection.kubeconfig points at the cluster. It returns once
// informers have synced.
func StartScheduler(ctx context.Context, configPath string) (*Scheduler, error) {
	opts := options.NewOptions()
	opts.ConfigFile = configPath
	// No health/metrics port in-process: several schedulers may share it.
	opts.SecureServing = nil
	if opts.InformerName == nil {
		name, err := cache.NewInformerName(fmt.Sprintf("phalanx-sandbox-%s", filepath.Base(configPath)))
		if err == nil {
			opts.InformerName = name
		}
	}

	ctx, cancel := context.WithCancel(ctx)
	cc, sched, err := app.Setup(ctx, opts, plugins.Registry()...)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("set up scheduler from %s: %w", configPath, err)
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
		return nil, fmt.Errorf("scheduler handlers did not sync: %w", err)
	}
	s := &Scheduler{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(s.done)
		defer cc.EventBroadcaster.Shutdown()
		defer cc.InformerFactory.Shutdown()
		sched.Run(ctx)
		klog.FromContext(ctx).V(2).Info("sandbox scheduler stopped")
	}()
	return s, nil
}
