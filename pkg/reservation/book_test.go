package reservation

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/phalanx-sched/phalanx/pkg/groups"
)

func TestOutranks(t *testing.T) {
	cases := []struct {
		name string
		a, b Gang
		want bool
	}{
		{"a higher priority outranks an older gang", gang("a", 10, 5), gang("b", 0, 1), true},
		{"a lower priority does not outrank a younger gang", gang("a", 0, 1), gang("b", 10, 5), false},
		{"at equal priority the older gang outranks", gang("a", 5, 1), gang("b", 5, 2), true},
		{"at equal priority the younger gang does not outrank", gang("a", 5, 2), gang("b", 5, 1), false},
		{"at equal priority and age the name decides", gang("a", 5, 1), gang("b", 5, 1), true},
		{"a gang does not outrank itself", gang("a", 5, 1), gang("a", 5, 1), false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			assert.Equal(t, c.want, c.a.outranks(c.b))
		})
	}
}

// TestOffer: two holds never share a node; a gang takes a domain from
// lower-ranked holds only, and within the share, displacing the
// lowest-ranked holds first.
func TestOffer(t *testing.T) {
	type offer struct {
		c        Hold
		choices  []Choice
		ok       bool
		domain   string
		displace []string
		why      string // a part of why, when refused
	}
	cases := []struct {
		name     string
		maxNodes int
		offers   []offer
		held     map[string]string // node → gang name at the end
	}{
		{
			name: "a younger gang of equal priority takes the next domain, not the one held", maxNodes: 10,
			offers: []offer{
				{c: cand("low", 0, 1), choices: []Choice{choice("r1", "a", "b")}, ok: true, domain: "r1"},
				{c: cand("young", 0, 2), choices: []Choice{choice("r1", "a", "b"), choice("r2", "c", "d")}, ok: true, domain: "r2"},
			},
			held: map[string]string{"a": "low", "b": "low", "c": "young", "d": "young"},
		},
		{
			name: "an overlap with an outranking hold is refused, and says whose", maxNodes: 10,
			offers: []offer{
				{c: cand("old", 0, 1), choices: []Choice{choice("r1", "a", "b")}, ok: true, domain: "r1"},
				{c: cand("young", 0, 2), choices: []Choice{choice("r1x", "b", "c")}, why: "rack=r1x overlaps the reservation of PodGroup ns/old"},
			},
			held: map[string]string{"a": "old", "b": "old"},
		},
		{
			name: "a higher-priority gang takes an overlapping domain over", maxNodes: 10,
			offers: []offer{
				{c: cand("low", 0, 1), choices: []Choice{choice("r1", "a", "b")}, ok: true, domain: "r1"},
				{c: cand("high", 10, 3), choices: []Choice{choice("r1x", "b", "c")}, ok: true, domain: "r1x", displace: []string{"low"}},
			},
			held: map[string]string{"b": "high", "c": "high"},
		},
		{
			name: "a hold beyond the share is refused", maxNodes: 3,
			offers: []offer{
				{c: cand("a", 0, 1), choices: []Choice{choice("r1", "n1", "n2")}, ok: true, domain: "r1"},
				{c: cand("c", 0, 2), choices: []Choice{choice("r2", "n3", "n4")}, why: "rack=r2 (2 nodes) would exceed the reservable share (3 nodes)"},
			},
			held: map[string]string{"n1": "a", "n2": "a"},
		},
		{
			name: "a higher-priority gang displaces the lowest-ranked holds to fit the share", maxNodes: 4,
			offers: []offer{
				{c: cand("mid", 5, 1), choices: []Choice{choice("r1", "n1", "n2")}, ok: true, domain: "r1"},
				{c: cand("low", 0, 2), choices: []Choice{choice("r2", "n3", "n4")}, ok: true, domain: "r2"},
				{c: cand("high", 10, 3), choices: []Choice{choice("r3", "n5", "n6")}, ok: true, domain: "r3", displace: []string{"low"}},
			},
			held: map[string]string{"n1": "mid", "n2": "mid", "n5": "high", "n6": "high"},
		},
		{
			name: "a gang displaces nobody it does not outrank for the share", maxNodes: 2,
			offers: []offer{
				{c: cand("high", 10, 1), choices: []Choice{choice("r1", "n1", "n2")}, ok: true, domain: "r1"},
				{c: cand("low", 0, 2), choices: []Choice{choice("r2", "n3", "n4")}, why: "would exceed the reservable share"},
			},
			held: map[string]string{"n1": "high", "n2": "high"},
		},
		{
			name: "a domain larger than the share is never held", maxNodes: 1,
			offers: []offer{{c: cand("a", 0, 1), choices: []Choice{choice("r1", "n1", "n2")}, why: "would exceed the reservable share (1 nodes)"}},
			held:   map[string]string{},
		},
		{
			name: "nothing to choose from", maxNodes: 10,
			offers: []offer{{c: cand("a", 0, 1), why: "no domain to hold"}},
			held:   map[string]string{},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := NewBook()
			for _, o := range c.offers {
				got, ok, displaced, why := b.Offer(o.c, o.choices, c.maxNodes)
				require.Equal(t, o.ok, ok, "%s: %s", o.c.Root, why)
				if !ok {
					assert.Contains(t, why, o.why)
					continue
				}
				assert.Equal(t, o.domain, got.Domain)
				var names []string
				for _, d := range displaced {
					names = append(names, d.Root.Name)
					assert.Equal(t, ReasonTakenOver, d.Reason)
					assert.Contains(t, d.Message, "was taken over by "+o.c.Root.String())
				}
				assert.Equal(t, o.displace, names)
			}
			held := map[string]string{}
			for _, h := range b.List() {
				for n := range h.Nodes {
					_, dup := held[n]
					require.False(t, dup, "node %s held twice", n)
					held[n] = h.Root.Name
				}
			}
			assert.Equal(t, c.held, held)
			assert.Equal(t, len(c.held), b.HeldNodes())
		})
	}
}

// TestAdmit: who may use a held node. Backfill admits pods of a higher
// priority than the gang, pods the gang may preempt, and pods whose
// activeDeadlineSeconds ends before the gang's expected start; nothing
// else, and with backfill off only pods of higher priority.
func TestAdmit(t *testing.T) {
	const prio = 10
	cases := []struct {
		name     string
		pod      *corev1.Pod
		preempts bool
		expected time.Duration // from now; 0: unknown
		backfill bool
		want     bool
		why      string
	}{
		{name: "a pod of higher priority", pod: podWith("p", 20, nil), want: true},
		{name: "a pod of higher priority with backfill off", pod: podWith("p", 20, nil), want: true, backfill: false},
		{name: "a lower-priority pod the gang may preempt", pod: podWith("p", 1, nil), preempts: true, backfill: true, want: true},
		{name: "a lower-priority pod of a gang that never preempts", pod: podWith("p", 1, nil), backfill: true, expected: time.Hour,
			why: "backfill needs a valid activeDeadlineSeconds"},
		{name: "a pod of the gang's own priority, which the gang may not preempt", pod: podWith("p", prio, nil), preempts: true, backfill: true, expected: time.Hour,
			why: "backfill needs a valid activeDeadlineSeconds"},
		{name: "a preemptible pod with backfill off", pod: podWith("p", 1, nil), preempts: true,
			why: "node is reserved for PodGroup ns/big (backfill is off)"},
		{name: "a pod that ends before the gang's expected start", pod: podWith("p", prio, secs(300)), backfill: true, expected: 10 * time.Minute, want: true},
		{name: "a pod that ends exactly at the gang's expected start", pod: podWith("p", prio, secs(600)), backfill: true, expected: 10 * time.Minute, want: true},
		{name: "a pod that ends after the gang's expected start", pod: podWith("p", prio, secs(3600)), backfill: true, expected: 10 * time.Minute,
			why: "node is reserved for PodGroup ns/big, expected to start at 2026-03-01T12:10:00Z; the pod's activeDeadlineSeconds ends after that"},
		{name: "a pod with a runtime bound while the gang's start is unknown", pod: podWith("p", prio, secs(1)), backfill: true,
			why: "node is reserved for PodGroup ns/big, whose start time is unknown, so no runtime fits before it"},
		{name: "a pod with a runtime bound and backfill off", pod: podWith("p", prio, secs(1)), expected: time.Hour,
			why: "(backfill is off)"},
		{name: "a pod without a runtime bound", pod: podWith("p", prio, nil), backfill: true, expected: time.Hour,
			why: "node is reserved for PodGroup ns/big; backfill needs a valid activeDeadlineSeconds"},
		{name: "a pod with a negative runtime bound", pod: podWith("p", prio, secs(-5)), backfill: true, expected: time.Hour, why: "valid activeDeadlineSeconds"},
		{name: "a pod with a zero runtime bound", pod: podWith("p", prio, secs(0)), backfill: true, expected: time.Hour, why: "valid activeDeadlineSeconds"},
		{name: "a pod with a runtime bound over 7 days", pod: podWith("p", prio, secs(8*24*3600)), backfill: true, expected: 30 * 24 * time.Hour,
			why: "valid activeDeadlineSeconds"},
		{name: "a pod with an overflowing runtime bound", pod: podWith("p", prio, secs(1<<40)), backfill: true, expected: time.Hour, why: "valid activeDeadlineSeconds"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := NewBook()
			h := cand("big", prio, 1)
			h.Preempts = c.preempts
			ch := choice("r1", "n1")
			if c.expected != 0 {
				ch.Expected = t0.Add(c.expected)
			}
			_, ok, _, _ := b.Offer(h, []Choice{ch}, 10)
			require.True(t, ok)
			got, why := b.Admit(c.pod, groups.Key{}, false, "n1", t0, c.backfill)
			assert.Equal(t, c.want, got, why)
			if !c.want {
				assert.Contains(t, why, c.why)
			}
			closed := b.Closed(key("other"), c.pod, t0, c.backfill)
			if c.want {
				assert.Empty(t, closed, "a plan of another gang whose pods may backfill")
			} else {
				assert.Equal(t, map[string]string{"n1": why}, closed, "a plan of another gang")
			}
		})
	}
}

// TestAdmitOwnHierarchyAndFreeNodes: the gang's own pods, and any pod on a
// node nobody holds, are admitted; a plan of the gang itself sees none of
// its nodes closed.
func TestAdmitOwnHierarchyAndFreeNodes(t *testing.T) {
	b := NewBook()
	_, ok, _, _ := b.Offer(cand("big", 10, 1), []Choice{choice("r1", "n1")}, 10)
	require.True(t, ok)
	low := podWith("p", 0, nil)
	ok, _ = b.Admit(low, key("big"), true, "n1", t0, true)
	assert.True(t, ok, "the gang's own member")
	ok, _ = b.Admit(low, key("big"), false, "n1", t0, true)
	assert.False(t, ok, "a pod not in a resolved group, whatever root it names")
	ok, _ = b.Admit(low, groups.Key{}, false, "n2", t0, true)
	assert.True(t, ok, "a node nobody holds")
	assert.Empty(t, b.Closed(key("big"), low, t0, true))
}

// TestTurnedAwayPodsAreTriedAgain: a pod a hold turned away is tried again
// when the hold's expected start moves or the hold ends, once.
func TestTurnedAwayPodsAreTriedAgain(t *testing.T) {
	ends := map[string]func(b *Book) map[string]*corev1.Pod{
		"its expected start moves": func(b *Book) map[string]*corev1.Pod { return b.Expect(key("big"), t0.Add(time.Minute), time.Time{}) },
		"its group is deleted": func(b *Book) map[string]*corev1.Pod {
			e, ok := b.Forget(key("big"))
			require.True(t, ok)
			return e.Waiting
		},
		"it expires": func(b *Book) map[string]*corev1.Pod {
			out := b.Sweep(t0.Add(time.Hour), time.Minute, nil)
			require.Len(t, out, 1)
			return out[0].Waiting
		},
		"a higher-ranked gang takes it over": func(b *Book) map[string]*corev1.Pod {
			_, ok, displaced, _ := b.Offer(cand("vip", 100, 2), []Choice{choice("r1", "n1")}, 10)
			require.True(t, ok)
			require.Len(t, displaced, 1)
			return displaced[0].Waiting
		},
	}
	for name, end := range ends {
		t.Run(name, func(t *testing.T) {
			b := NewBook()
			_, ok, _, _ := b.Offer(cand("big", 10, 1), []Choice{choice("r1", "n1")}, 10)
			require.True(t, ok)
			ok, _ = b.Admit(podWith("late", 0, nil), groups.Key{}, false, "n1", t0, true)
			require.False(t, ok)
			assert.Empty(t, b.Expect(key("big"), time.Time{}, time.Time{}), "an unchanged expected start tries nobody")
			got := end(b)
			assert.Contains(t, got, "ns/late")
			if name == "its expected start moves" {
				assert.Empty(t, b.Expect(key("big"), t0.Add(2*time.Minute), time.Time{}), "tried twice")
			}
		})
	}
}

// TestRefresh: a new failed plan refreshes the numbers of the held domain;
// the gang keeps its domain even when another is now closer.
func TestRefresh(t *testing.T) {
	b := NewBook()
	_, ok, _, _ := b.Offer(cand("big", 10, 1), []Choice{choice("r1", "n1")}, 10)
	require.True(t, ok)
	_, _, ok = b.Refresh(key("big"), []Choice{choice("r2", "n2")}, nil)
	assert.False(t, ok, "refreshed from another domain")
	fresh := choice("r1", "n1")
	fresh.Short, fresh.Expected = cpu(4000), t0.Add(time.Minute)
	h, _, ok := b.Refresh(key("big"), []Choice{choice("r2", "n2"), fresh}, nil)
	require.True(t, ok)
	assert.Equal(t, "r1", h.Domain)
	assert.Equal(t, cpu(4000), h.Short)
	assert.Equal(t, t0.Add(time.Minute), h.Expected)
	_, _, ok = b.Refresh(key("other"), []Choice{fresh}, nil)
	assert.False(t, ok, "a gang that holds nothing")
}

// TestDue: a gang may be offered a hold once it waited its threshold and
// any cooldown of its name is over; a gang that holds is always due (its
// numbers are refreshed).
func TestDue(t *testing.T) {
	cases := []struct {
		name    string
		waiting bool
		waited  time.Duration
		after   time.Duration
		cooled  time.Duration // cooldown left, 0: none
		due     bool
		at      time.Duration // from now, when not due; -1: never
	}{
		{name: "waited its threshold", waiting: true, waited: time.Minute, after: time.Minute, due: true},
		{name: "waited less than its threshold", waiting: true, waited: 59 * time.Second, after: time.Minute, at: time.Second},
		{name: "never, by its annotation", waiting: true, waited: 24 * time.Hour, after: -1, at: -1},
		{name: "nothing pending", waited: time.Hour, after: time.Minute, at: -1},
		{name: "waited, but its cooldown lasts", waiting: true, waited: time.Hour, after: time.Minute, cooled: 5 * time.Minute, at: 5 * time.Minute},
		{name: "its cooldown ends before its threshold", waiting: true, waited: 0, after: time.Minute, cooled: time.Second, at: time.Minute},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := NewBook()
			if c.cooled != 0 {
				b.coolUntilLocked(key("big"), t0.Add(c.cooled))
			}
			due, at := b.Due(key("big"), c.waiting, t0.Add(-c.waited), c.after, t0)
			assert.Equal(t, c.due, due)
			switch {
			case c.due:
			case c.at < 0:
				assert.True(t, at.IsZero(), "due at %v", at)
			default:
				assert.Equal(t, t0.Add(c.at), at)
			}
		})
	}
	b := NewBook()
	_, ok, _, _ := b.Offer(cand("big", 10, 1), []Choice{choice("r1", "n1")}, 10)
	require.True(t, ok)
	due, _ := b.Due(key("big"), false, time.Time{}, -1, t0)
	assert.True(t, due, "a gang that holds")
}

func TestReminders(t *testing.T) {
	b := NewBook()
	b.Remind(key("a"), t0.Add(time.Second))
	b.Remind(key("b"), t0.Add(time.Minute))
	assert.Empty(t, b.Reminders(t0))
	assert.Equal(t, []groups.Key{key("a")}, b.Reminders(t0.Add(time.Second)))
	assert.Empty(t, b.Reminders(t0.Add(time.Second)), "reminded twice")
	b.Forget(key("b"))
	assert.Empty(t, b.Reminders(t0.Add(time.Hour)), "a deleted group reminded")
}

// TestSweep: a hold ends when its gang bound, when its group is gone, and
// at maxHold; after an expiry the gang's name may not hold again for
// maxHold, whatever kind of group is created under it, and the cooldown is
// forgotten once over.
func TestSweep(t *testing.T) {
	const hold = 15 * time.Minute
	cases := []struct {
		name   string
		fate   Fate
		age    time.Duration
		reason string
		msg    string
	}{
		{name: "a gang still waiting keeps its hold", fate: Waiting, age: hold - time.Second},
		{name: "a gang that bound ends its hold", fate: Bound, age: time.Minute, reason: ReasonReleasedBound, msg: "the gang bound; rack=r1 held for 1m0s"},
		{name: "a deleted group ends its hold", fate: Gone, age: time.Minute, reason: ReasonGroupDeleted},
		{name: "a hold ends at maxHold", fate: Waiting, age: hold, reason: ReasonExpired,
			msg: "rack=r1 was held for the maximum 15m0s; no new hold before 2026-03-01T12:15:00Z"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := NewBook()
			h := cand("big", 10, 1)
			h.Since = t0.Add(-c.age)
			_, ok, _, _ := b.Offer(h, []Choice{choice("r1", "n1")}, 10)
			require.True(t, ok)
			ended := b.Sweep(t0, hold, map[groups.Key]Fate{key("big"): c.fate})
			if c.reason == "" {
				assert.Empty(t, ended)
				assert.Equal(t, 1, b.Len())
				return
			}
			require.Len(t, ended, 1)
			assert.Equal(t, c.reason, ended[0].Reason)
			assert.Equal(t, c.msg, ended[0].Message)
			assert.Zero(t, b.Len())
			due, _ := b.Due(key("big"), true, t0.Add(-time.Hour), 0, t0)
			assert.Equal(t, c.reason != ReasonExpired, due, "may hold again at once")
			if c.reason == ReasonExpired {
				assert.Equal(t, &Record{Key: "rack", Domain: "r1", Since: h.Since, Expired: t0}, ended[0].Record)
			} else {
				assert.Nil(t, ended[0].Record)
			}
		})
	}
}

func TestCooldownOutlivesTheGroup(t *testing.T) {
	const hold = 15 * time.Minute
	b := NewBook()
	h := cand("big", 10, 1)
	h.Since = t0.Add(-hold)
	_, ok, _, _ := b.Offer(h, []Choice{choice("r1", "n1")}, 10)
	require.True(t, ok)
	require.Len(t, b.Sweep(t0, hold, nil), 1)
	_, ok = b.Forget(key("big"))
	assert.False(t, ok, "nothing left to end")

	composite := groups.Key{Dialect: groups.Phalanx, Kind: groups.CompositeKind, Namespace: "ns", Name: "big"}
	for _, k := range []groups.Key{key("big"), composite} {
		due, at := b.Due(k, true, t0.Add(-time.Hour), 0, t0.Add(time.Minute))
		assert.False(t, due, "%s re-created under the name", k)
		assert.Equal(t, t0.Add(hold), at)
	}
	due, _ := b.Due(groups.Key{Dialect: groups.Phalanx, Kind: groups.PodGroupKind, Namespace: "other", Name: "big"}, true, t0.Add(-time.Hour), 0, t0)
	assert.True(t, due, "the same name in another namespace")
	due, _ = b.Due(key("big"), true, t0.Add(-time.Hour), 0, t0.Add(hold))
	assert.True(t, due, "once the cooldown is over")

	b.Sweep(t0.Add(hold), hold, nil)
	assert.Len(t, b.cooldown, 1, "forgotten before it ended")
	b.Sweep(t0.Add(hold+time.Second), hold, nil)
	assert.Empty(t, b.cooldown, "kept after it ended")
}
