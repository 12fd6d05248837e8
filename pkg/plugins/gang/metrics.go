package gang

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"

	"github.com/phalanx-sched/phalanx/pkg/groups"
)

// Results of a gang attempt, the values of the result label.
const (
	resultAllowed  = "allowed"
	resultRejected = "rejected"
	resultTimeout  = "timeout"
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
		legacyregistry.MustRegister(groupSchedulingDuration, gangAttempts, groupsWaiting, bindSlotWait, bindsInFlight, gangRecoveries)
	})
}

// attempt is one round of a hierarchy's members waiting in Permit.
type attempt struct {
	started time.Time
	members []types.UID
}

// attempts follows, per hierarchy root, the round its members are waiting
// in Permit, for the metrics above. It only observes: scheduling never
// reads it.
type attempts struct {
	mu   sync.Mutex
	now  func() time.Time
	open map[groups.Key]*attempt
	// rootOf remembers the hierarchy of every member that waited, so the
	// round can be closed when that member is unreserved after the cache
	// has already forgotten it (a deleted pod).
	rootOf map[types.UID]groups.Key
}

func newAttempts() *attempts {
	return &attempts{now: time.Now, open: map[groups.Key]*attempt{}, rootOf: map[types.UID]groups.Key{}}
}

// waiting records that member uid of hierarchy root waits in Permit; the
// first such member starts the round.
func (a *attempts) waiting(root groups.Key, uid types.UID) {
	a.mu.Lock()
	defer a.mu.Unlock()
	at := a.open[root]
	if at == nil {
		at = &attempt{started: a.now()}
		a.open[root] = at
		groupsWaiting.Inc()
	}
	if _, seen := a.rootOf[uid]; !seen {
		at.members = append(at.members, uid)
		a.rootOf[uid] = root
	}
}

// allowed closes the round of root because the hierarchy reached quorum.
func (a *attempts) allowed(root groups.Key) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if at := a.closeLocked(root); at != nil {
		groupSchedulingDuration.Observe(a.now().Sub(at.started).Seconds())
		gangAttempts.WithLabelValues(resultAllowed).Inc()
	}
}

// failed closes the round of the hierarchy of member uid (root when known,
// else the hierarchy uid waited for) because a member failed. A round that
// has lasted the Permit timeout ended by timing out: the first waiting
// member's timer fires no earlier than that.
func (a *attempts) failed(root groups.Key, known bool, uid types.UID, timeout time.Duration) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if !known {
		if root, known = a.rootOf[uid]; !known {
			return
		}
	}
	at := a.closeLocked(root)
	if at == nil {
		return
	}
	result := resultRejected
	if a.now().Sub(at.started) >= timeout {
		result = resultTimeout
	}
	gangAttempts.WithLabelValues(result).Inc()
}

// timedOut closes the round of root because its deadline passed.
func (a *attempts) timedOut(root groups.Key) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if at := a.closeLocked(root); at != nil {
		gangAttempts.WithLabelValues(resultTimeout).Inc()
	}
}

func (a *attempts) closeLocked(root groups.Key) *attempt {
	at := a.open[root]
	if at == nil {
		return nil
	}
	delete(a.open, root)
	for _, uid := range at.members {
		delete(a.rootOf, uid)
	}
	groupsWaiting.Dec()
	return at
}

// forget closes root's round, uncounted: the group is gone.
func (a *attempts) forget(root groups.Key) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.closeLocked(root)
}

// reset forgets every open round, when the scheduler stops.
func (a *attempts) reset() {
	a.mu.Lock()
	defer a.mu.Unlock()
	for root := range a.open {
		a.closeLocked(root)
	}
}

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
