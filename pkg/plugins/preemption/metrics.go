package preemption

import (
	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
)

var (
	preemptions = metrics.NewCounter(&metrics.CounterOpts{
		Name:           "phalanx_group_preemptions_total",
		Help:           "Group-level preemptions performed.",
		StabilityLevel: metrics.ALPHA,
	})
	victimsTotal = metrics.NewCounter(&metrics.CounterOpts{
		Name:           "phalanx_preemption_victims_total",
		Help:           "Pods evicted by group-level preemption.",
		StabilityLevel: metrics.ALPHA,
	})
	searches = metrics.NewCounter(&metrics.CounterOpts{
		Name:           "phalanx_preemption_searches_total",
		Help:           "Victim searches run by group-level preemption.",
		StabilityLevel: metrics.ALPHA,
	})
)

func init() {
	legacyregistry.MustRegister(preemptions, victimsTotal, searches)
}
