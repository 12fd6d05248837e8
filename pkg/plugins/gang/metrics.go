package gang

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"

	"github.com/phalanx-sched/phalanx/pkg/gangcore"
	"github.com/phalanx-sched/phalanx/pkg/groups"
)

var (
	groupSchedulingDuration = metrics.NewHistogram(&metrics.HistogramOpts{
		Name: "phalanx_group_scheduling_duration_seconds",
		Help: "Time from the first member of a group hierarchy waiting in Permit to the hierarchy reaching quorum. " +
			"Only attempts that waited are observed.",
		Buckets:        metrics.ExponentialBuckets(0.005, 2, 20),
		StabilityLevel: metrics.ALPHA,
	})
	gangAttempts = metrics.NewCounterVec(&metrics.CounterOpts{
		Name: "phalanx_gang_attempts_total",
		Help: "Gang attempts that waited in Permit, by result: allowed (quorum reached), " +
			"rejected (a member failed and every waiting member was released), " +
			"timeout (no member arrived for permitWaitingTimeSeconds, or maxPermitWaitingTimeSeconds passed, without quorum).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"result"})
	groupsWaiting = metrics.NewGauge(&metrics.GaugeOpts{
		Name:           "phalanx_groups_waiting",
		Help:           "Group hierarchies with members waiting in Permit for quorum.",
		StabilityLevel: metrics.ALPHA,
	})
	bindSlotWait = metrics.NewHistogram(&metrics.HistogramOpts{
		Name: "phalanx_bind_slot_wait_seconds",
		Help: "Time a pod that passed Permit waited for one of the bindConcurrency binding slots. " +
			"Observed only when PhalanxGang is enabled before DefaultBinder at the bind extension point.",
		Buckets:        metrics.ExponentialBuckets(0.001, 2, 18),
		StabilityLevel: metrics.ALPHA,
	})
	bindsInFlight = metrics.NewGauge(&metrics.GaugeOpts{
		Name:           "phalanx_binds_in_flight",
		Help:           "Binding requests holding a slot: sent, or about to be, and not yet answered.",
		StabilityLevel: metrics.ALPHA,
	})
	claimBacklogWait = metrics.NewHistogram(&metrics.HistogramOpts{
		Name: "phalanx_claim_backlog_wait_seconds",
		Help: "Time the scheduling cycle of a pod with ResourceClaims waited because 16 pods with claims (bindConcurrency if lower) " +
			"were let through Permit and not yet bound. Observed only when it waited.",
		Buckets:        metrics.ExponentialBuckets(0.001, 2, 14),
		StabilityLevel: metrics.ALPHA,
	})
	gangRecoveries = metrics.NewCounterVec(&metrics.CounterOpts{
		Name: "phalanx_gang_recoveries_total",
		Help: "Gangs bound below their minimum (a binding failed after Permit, or a scheduler stopped during the binds), " +
			"by event: opened (the recovery started), whole (the gang reached its minimum in time), " +
			"evicted (its bound members were evicted after permitWaitingTimeSeconds).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"event"})
	registerMetrics sync.Once
)

func init() {
	registerMetrics.Do(func() {
		legacyregistry.MustRegister(groupSchedulingDuration, gangAttempts, groupsWaiting, bindSlotWait, bindsInFlight, claimBacklogWait, gangRecoveries)
	})
}

// attempts is gangcore.Attempts with the metrics above: it opens and
// closes the rounds and counts how each ended.
type attempts struct{ *gangcore.Attempts }

func newAttempts() *attempts { return &attempts{gangcore.NewAttempts(time.Now)} }

func (a *attempts) waiting(root groups.Key, uid types.UID) {
	if a.Waiting(root, uid) {
		groupsWaiting.Inc()
	}
}

func (a *attempts) allowed(root groups.Key) {
	if took, ok := a.Allowed(root); ok {
		groupsWaiting.Dec()
		groupSchedulingDuration.Observe(took.Seconds())
		gangAttempts.WithLabelValues(string(gangcore.Allowed)).Inc()
	}
}

func (a *attempts) failed(root groups.Key, known bool, uid types.UID, limit time.Duration) {
	if result, ok := a.Failed(root, known, uid, limit); ok {
		groupsWaiting.Dec()
		gangAttempts.WithLabelValues(string(result)).Inc()
	}
}

func (a *attempts) timedOut(root groups.Key) {
	if a.Expired(root) {
		groupsWaiting.Dec()
		gangAttempts.WithLabelValues(string(gangcore.TimedOut)).Inc()
	}
}

func (a *attempts) forget(root groups.Key) {
	if a.Forget(root) {
		groupsWaiting.Dec()
	}
}

func (a *attempts) reset() { groupsWaiting.Add(-float64(a.Reset())) }

// hierarchyOf returns the root of pod's hierarchy, if the cache knows it.
func (pl *Gang) hierarchyOf(uid types.UID) (groups.Key, bool) {
	leaf, ok := pl.groups.GroupOf(uid)
	if !ok {
		return groups.Key{}, false
	}
	if root, ok := pl.groups.RootOf(leaf); ok {
		return root, true
	}
	return leaf, true
}

// recovery counts an event of a gang's recovery (mend.go). The counter is
// looked up at each use: a vector hands out working counters only once
// registered.
func recovery(event string) { gangRecoveries.WithLabelValues(event).Inc() }
