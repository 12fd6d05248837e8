package gang

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/component-base/metrics/testutil"

	"github.com/phalanx-sched/phalanx/pkg/gangcore"
	"github.com/phalanx-sched/phalanx/pkg/groups"
)

// snapshot reads the gang metrics; the registry is process-global, so the
// tests compare before and after.
type snapshot struct {
	allowed, rejected, timeout float64
	waiting                    float64
	observed                   uint64
	observedSum                float64
}

func readMetrics(t *testing.T) snapshot {
	t.Helper()
	var s snapshot
	var err error
	s.allowed, err = testutil.GetCounterMetricValue(gangAttempts.WithLabelValues(string(gangcore.Allowed)))
	require.NoError(t, err)
	s.rejected, err = testutil.GetCounterMetricValue(gangAttempts.WithLabelValues(string(gangcore.Rejected)))
	require.NoError(t, err)
	s.timeout, err = testutil.GetCounterMetricValue(gangAttempts.WithLabelValues(string(gangcore.TimedOut)))
	require.NoError(t, err)
	s.waiting, err = testutil.GetGaugeMetricValue(groupsWaiting)
	require.NoError(t, err)
	s.observed, err = testutil.GetHistogramMetricCount(groupSchedulingDuration.ObserverMetric)
	require.NoError(t, err)
	s.observedSum, err = testutil.GetHistogramMetricValue(groupSchedulingDuration.ObserverMetric)
	require.NoError(t, err)
	return s
}

// fakeClock is advanced by hand.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time { return c.t }

func TestAttemptMetrics(t *testing.T) {
	rootA := groups.Key{Kind: groups.PodGroupKind, Namespace: "ns", Name: "a"}
	rootB := groups.Key{Kind: groups.CompositeKind, Namespace: "ns", Name: "b"}
	const timeout = 60 * time.Second

	tests := []struct {
		name string
		run  func(a *attempts, clock *fakeClock)
		want snapshot // deltas
	}{{
		name: "a gang whose members waited 3s and then reached quorum counts one allowed attempt of 3s",
		run: func(a *attempts, clock *fakeClock) {
			a.waiting(rootA, "a-0")
			clock.t = clock.t.Add(time.Second)
			a.waiting(rootA, "a-1")
			clock.t = clock.t.Add(2 * time.Second)
			a.allowed(rootA)
			// A late member of a gang that already has quorum starts no round.
			a.allowed(rootA)
		},
		want: snapshot{allowed: 1, observed: 1, observedSum: 3},
	}, {
		name: "a member failing before the timeout counts a rejected attempt and nothing is observed",
		run: func(a *attempts, clock *fakeClock) {
			a.waiting(rootA, "a-0")
			clock.t = clock.t.Add(5 * time.Second)
			a.failed(rootA, true, "a-other", timeout)
			// The released members are unreserved in turn: no second count.
			a.failed(rootA, true, "a-0", timeout)
		},
		want: snapshot{rejected: 1},
	}, {
		name: "a round that lasted the Permit timeout counts as a timeout",
		run: func(a *attempts, clock *fakeClock) {
			a.waiting(rootA, "a-0")
			clock.t = clock.t.Add(timeout)
			a.failed(rootA, true, "a-0", timeout)
		},
		want: snapshot{timeout: 1},
	}, {
		name: "a member the cache has forgotten still closes the round it waited in",
		run: func(a *attempts, _ *fakeClock) {
			a.waiting(rootB, "b-0")
			a.failed(groups.Key{}, false, "b-0", timeout)
		},
		want: snapshot{rejected: 1},
	}, {
		name: "an unknown member of an unknown hierarchy changes nothing",
		run: func(a *attempts, _ *fakeClock) {
			a.failed(groups.Key{}, false, "stranger", timeout)
			a.allowed(rootB)
		},
		want: snapshot{},
	}, {
		name: "two hierarchies waiting at once count two waiting groups until they finish",
		run: func(a *attempts, _ *fakeClock) {
			a.waiting(rootA, "a-0")
			a.waiting(rootA, "a-1")
			a.waiting(rootB, "b-0")
		},
		want: snapshot{waiting: 2},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			clock := &fakeClock{t: time.Unix(1000, 0)}
			a := &attempts{gangcore.NewAttempts(clock.now)}
			before := readMetrics(t)
			tc.run(a, clock)
			after := readMetrics(t)
			assert.Equal(t, tc.want.allowed, after.allowed-before.allowed, "allowed")
			assert.Equal(t, tc.want.rejected, after.rejected-before.rejected, "rejected")
			assert.Equal(t, tc.want.timeout, after.timeout-before.timeout, "timeout")
			assert.Equal(t, tc.want.waiting, after.waiting-before.waiting, "groups waiting")
			assert.Equal(t, tc.want.observed, after.observed-before.observed, "observations")
			assert.InDelta(t, tc.want.observedSum, after.observedSum-before.observedSum, 1e-9, "observed seconds")

			a.reset()
			assert.Equal(t, before.waiting, readMetrics(t).waiting, "reset returns the waiting gauge")
			rounds, members := a.Open()
			assert.Zero(t, rounds)
			assert.Zero(t, members)
		})
	}
}
