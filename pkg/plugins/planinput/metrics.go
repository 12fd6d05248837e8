package planinput

import (
	"sync"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
)

var (
	probeDuration = metrics.NewHistogram(&metrics.HistogramOpts{
		Name:           "phalanx_probe_duration_seconds",
		Help:           "Time to run the profile's filters for one constrained pod shape against the snapshot.",
		Buckets:        metrics.ExponentialBuckets(0.0001, 2, 16),
		StabilityLevel: metrics.ALPHA,
	})
	registerOnce sync.Once
)

func init() {
	registerOnce.Do(func() { legacyregistry.MustRegister(probeDuration) })
}
