package topology

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
	"github.com/phalanx-sched/phalanx/pkg/reservation"
)

// restoreArgs: 4 racks of 2 nodes, so at most 4 nodes (two racks) may be
// held at once.
func restoreArgs() reservation.Args {
	return reservation.Args{AfterSeconds: 60, MaxHoldSeconds: 900, MaxSharePercent: 50}
}

// TestRestoredHoldsStayWithinTheShare: whoever may write a group's status
// can write a reservation record naming any domain. A scheduler that
// restarts never holds more for such records than maxSharePercent of the
// nodes, nor a domain the gang could not have been granted.
func TestRestoredHoldsStayWithinTheShare(t *testing.T) {
	type claim struct {
		parent, group, key string
		// held is the record's key and domain.
		heldKey, heldDomain string
		created             time.Duration // before the restart
	}
	rackHold := func(group string, rack int) claim {
		return claim{group: group, key: testRackKey, created: time.Hour, heldKey: testRackKey, heldDomain: fmt.Sprintf("rack-%d", rack)}
	}
	cases := []struct {
		name    string
		claims  []claim
		wantMax int
		want    []string // exactly these nodes, when set
	}{
		{
			name:   "a hold naming a label every node carries, not the gang's topology key, is not restored",
			claims: []claim{{group: "big", key: testRackKey, created: time.Hour, heldKey: testZoneKey, heldDomain: "zone-0"}},
			want:   []string{},
		},
		{
			name:   "a hold of the gang's own key that spans every node, more than the share, is not restored",
			claims: []claim{{group: "big", key: testZoneKey, created: time.Hour, heldKey: testZoneKey, heldDomain: "zone-0"}},
			want:   []string{},
		},
		{
			name:    "holds that together exceed the share are restored only up to it, highest-ranked first",
			claims:  []claim{rackHold("g0", 0), rackHold("g1", 1), rackHold("g2", 2), rackHold("g3", 3)},
			wantMax: 4,
		},
		{
			name:   "a hold claimed on a child group, for which no hold is ever granted, is not restored",
			claims: []claim{{parent: "team", group: "big", key: testRackKey, created: time.Hour, heldKey: testRackKey, heldDomain: "rack-1"}},
			want:   []string{},
		},
		{
			name:   "a hold of a gang that has not waited afterSeconds is not restored",
			claims: []claim{{group: "big", key: testRackKey, created: 10 * time.Second, heldKey: testRackKey, heldDomain: "rack-1"}},
			want:   []string{},
		},
		{
			name:   "a hold the scheduler could have granted is restored",
			claims: []claim{rackHold("big", 1)},
			want:   []string{"r1-n0", "r1-n1"},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w := newResvWorld(t, 4, restoreArgs())
			for i, cl := range c.claims {
				// Distinct creation times rank the gangs g0 first.
				created := w.now.Add(-cl.created + time.Duration(i)*time.Second)
				w.gangIn(cl.parent, cl.group, cl.key, created, nil, holding(cl.heldKey, cl.heldDomain, w.now.Add(-time.Minute)))
			}
			w.restart()
			got := w.refused()
			assert.LessOrEqual(t, len(got), 4, "held %v: more than maxSharePercent of 8 nodes", got)
			if c.wantMax > 0 {
				assert.Len(t, got, c.wantMax, "held %v", got)
			}
			if c.want != nil {
				assert.ElementsMatch(t, c.want, got)
			}
			if c.wantMax == 4 {
				assert.ElementsMatch(t, []string{"r0-n0", "r0-n1", "r1-n0", "r1-n1"}, got, "the two oldest gangs keep their racks")
			}
		})
	}
}

// TestRestoredHoldsEndOnTime: a restored hold ends maxHoldSeconds after it
// began, and never later than maxHoldSeconds after the restart, whatever
// start its condition claims.
func TestRestoredHoldsEndOnTime(t *testing.T) {
	const hold = 900 * time.Second
	cases := []struct {
		name  string
		since time.Duration // of the condition, relative to the restart
		// left is how long the restored hold lasts; 0: not restored.
		left time.Duration
	}{
		{name: "a hold claiming to start a year from now ends maxHoldSeconds after the restart", since: 365 * 24 * time.Hour, left: hold},
		{name: "a hold claiming to start a second from now ends maxHoldSeconds after the restart", since: time.Second, left: hold},
		{name: "a hold that began ten minutes ago keeps its start and ends five minutes after the restart", since: -10 * time.Minute, left: 5 * time.Minute},
		{name: "a hold that reached its maximum before the restart is not restored", since: -hold, left: 0},
		{name: "a hold that began a day ago is not restored", since: -24 * time.Hour, left: 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w := newResvWorld(t, 4, restoreArgs())
			w.gang("big", testRackKey, w.now.Add(-48*time.Hour), nil, holding(testRackKey, "rack-1", w.now.Add(c.since)))
			w.restart()
			if c.left == 0 {
				assert.Empty(t, w.refused(), "held right after the restart")
				w.after(time.Second)
				assert.Empty(t, w.refused(), "held after the first sweep")
				return
			}
			require.Equal(t, []string{"r1-n0", "r1-n1"}, w.refused(), "restored")
			w.after(c.left - time.Second)
			assert.Equal(t, []string{"r1-n0", "r1-n1"}, w.refused(), "held a second before it ends")
			w.after(time.Second)
			assert.Empty(t, w.refused(), "held past its maximum")
		})
	}
}

// TestRestoredExpiryKeepsTheGangFromHoldingAgain: a hold that had already
// reached its maximum when the scheduler restarted is not restored, and
// its gang waits maxHoldSeconds from the hold's end before it may hold
// again, as it would have without the restart.
func TestRestoredExpiryKeepsTheGangFromHoldingAgain(t *testing.T) {
	const hold = 900 * time.Second
	w := newResvWorld(t, 4, restoreArgs())
	// Began 1000s ago: ended 100s ago, may hold again in 800s.
	big := w.gang("big", testRackKey, w.now.Add(-48*time.Hour), nil, holding(testRackKey, "rack-1", w.now.Add(-1000*time.Second)))
	w.restart()
	require.Empty(t, w.refused())
	w.planFails(big)
	assert.Empty(t, w.refused(), "held again before maxHoldSeconds passed since the hold ended")
	w.after(hold - 100*time.Second)
	w.planFails(big)
	assert.Len(t, w.refused(), 2, "not held once the cooldown passed")
}

// TestRestoreIgnoresWhatDoesNotParse: a group status the scheduler cannot
// read as a hold holds nothing, and does not keep the gang from a hold of
// its own. Only the record is read: a Holding condition without one (as
// an earlier version of the scheduler wrote) restores nothing.
func TestRestoreIgnoresWhatDoesNotParse(t *testing.T) {
	// Every record below but the one without a start began a minute
	// before the restart.
	cases := []struct {
		name string
		st   func(st *v1alpha1.PodGroupStatus)
	}{
		{name: "a Holding condition without a record", st: func(st *v1alpha1.PodGroupStatus) { st.Reservation = nil }},
		{name: "a condition that is no hold, without a record", st: func(st *v1alpha1.PodGroupStatus) {
			st.Reservation, st.Conditions[0].Message = nil, "garbage"
		}},
		{name: "a record without a domain", st: func(st *v1alpha1.PodGroupStatus) { st.Reservation.Domain = "" }},
		{name: "a record without a key", st: func(st *v1alpha1.PodGroupStatus) { st.Reservation.TopologyKey = "" }},
		{name: "a record of a domain no node is in", st: func(st *v1alpha1.PodGroupStatus) { st.Reservation.Domain = "rack-9" }},
		{name: "a record without a start", st: func(st *v1alpha1.PodGroupStatus) { st.Reservation.Since = metav1.Time{} }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w := newResvWorld(t, 4, restoreArgs())
			st := holding(testRackKey, "rack-1", w.now.Add(-time.Minute))
			c.st(&st)
			big := w.gang("big", testRackKey, w.now.Add(-time.Hour), nil, st)
			w.restart()
			assert.Empty(t, w.refused(), "held for an unreadable status")
			w.after(time.Second)
			w.planFails(big)
			assert.Len(t, w.refused(), 2, "the gang's own hold, granted as usual")
		})
	}
}

// TestRestoredExpiryRecordKeepsTheGangWaiting: the record of a hold that
// expired before the restart keeps its gang from holding again until
// maxHoldSeconds after the expiry, as the scheduler that saw it expire
// would have.
func TestRestoredExpiryRecordKeepsTheGangWaiting(t *testing.T) {
	const hold = 900 * time.Second
	w := newResvWorld(t, 4, restoreArgs())
	st := holding(testRackKey, "rack-1", w.now.Add(-1000*time.Second))
	expired := metav1.NewTime(w.now.Add(-100 * time.Second))
	st.Reservation.Expired = &expired
	big := w.gang("big", testRackKey, w.now.Add(-48*time.Hour), nil, st)
	w.restart()
	require.Empty(t, w.refused(), "an expired hold restored")
	w.planFails(big)
	assert.Empty(t, w.refused(), "held again before maxHoldSeconds passed since the expiry")
	w.after(hold - 100*time.Second)
	w.planFails(big)
	assert.Len(t, w.refused(), 2, "not held once the cooldown passed")
}
