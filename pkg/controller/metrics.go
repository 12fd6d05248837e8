package controller

import (
	"sync"
	"time"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
)

var (
	reconcileTotal = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace:      "phalanx",
		Subsystem:      "controller",
		Name:           "reconcile_total",
		Help:           "Reconciles by controller (workload, job, job-pods, podgroup-status) and result (success, error).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"controller", "result"})

	reconcileDuration = metrics.NewHistogramVec(&metrics.HistogramOpts{
		Namespace:      "phalanx",
		Subsystem:      "controller",
		Name:           "reconcile_duration_seconds",
		Help:           "Time one reconcile took, API writes included, by controller.",
		Buckets:        metrics.ExponentialBuckets(0.0005, 2, 14),
		StabilityLevel: metrics.ALPHA,
	}, []string{"controller"})

	registerOnce sync.Once
)

// RegisterMetrics registers the controller metrics in the legacy registry,
// which k8s.io/component-base serves. It is safe to call more than once,
// as the sandbox does for every cluster it starts in one process.
func RegisterMetrics() {
	registerOnce.Do(func() {
		legacyregistry.MustRegister(reconcileTotal, reconcileDuration)
	})
}

func observeReconcile(controller string, err error, took time.Duration) {
	result := "success"
	if err != nil {
		result = "error"
	}
	reconcileTotal.WithLabelValues(controller, result).Inc()
	reconcileDuration.WithLabelValues(controller).Observe(took.Seconds())
}
