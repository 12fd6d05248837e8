package topology

import (
	"sync"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
)

var (
	planDuration = metrics.NewHistogram(&metrics.HistogramOpts{
		Name:           "phalanx_plan_duration_seconds",
		Help:           "Time to plan the placement of one group hierarchy.",
		Buckets:        metrics.ExponentialBuckets(0.0001, 2, 16),
		StabilityLevel: metrics.ALPHA,
	})
	planRejections = metrics.NewCounterVec(&metrics.CounterOpts{
		Name:           "phalanx_plan_rejections_total",
		Help:           "Planned nodes the profile's Filter refused a member on, by the refusing plugin. Each is remembered so the group's next plan avoids it.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"plugin"})
	reservationsHeld = metrics.NewGauge(&metrics.GaugeOpts{
		Name:           "phalanx_reservations_held",
		Help:           "Domains held for waiting gangs now.",
		StabilityLevel: metrics.ALPHA,
	})
	reservationsEnded = metrics.NewCounterVec(&metrics.CounterOpts{
		Name:           "phalanx_reservations_ended_total",
		Help:           "Reservations ended, by reason (Bound, Expired, TakenOver, GroupDeleted).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"reason"})
	registerOnce sync.Once
)

func init() {
	registerOnce.Do(func() {
		legacyregistry.MustRegister(planDuration, planRejections, reservationsHeld, reservationsEnded)
	})
}
