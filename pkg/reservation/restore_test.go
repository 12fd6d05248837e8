package reservation

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/phalanx-sched/phalanx/pkg/groups"
)

// racks: r0 and r1 of two nodes, all in zone z.
func racks() map[string]map[string]string {
	return map[string]map[string]string{
		"r0-a": {"rack": "r0", "zone": "z"}, "r0-b": {"rack": "r0", "zone": "z"},
		"r1-a": {"rack": "r1", "zone": "z"}, "r1-b": {"rack": "r1", "zone": "z"},
	}
}

// TestCheck: a record read after a restart is a claim. It is restored only
// as a hold this scheduler could have granted; every other claim says why
// not, and an expiry keeps the gang waiting.
func TestCheck(t *testing.T) {
	const hold = 900 * time.Second
	args := Args{AfterSeconds: 60, MaxHoldSeconds: 900, MaxSharePercent: 50}
	rec := func(k, d string, since time.Duration) *Record {
		return &Record{Key: k, Domain: d, Since: t0.Add(since)}
	}
	waiting := tree("big", "rack", t0.Add(-time.Hour), true, false)
	child := tree("team", "", t0.Add(-time.Hour))
	child.Key.Kind = groups.CompositeKind
	child.Children = []*groups.Tree{waiting}
	cases := []struct {
		name   string
		claim  Claim
		tree   *groups.Tree
		after  time.Duration
		reason string // "" and !hold: nothing to tell
		why    string
		hold   bool
		cool   time.Duration // from now; 0: none
	}{
		{name: "a record the scheduler could have granted", claim: Claim{Record: rec("rack", "r1", -time.Minute)}, tree: waiting, after: time.Minute, hold: true},
		{name: "no record and no hold claimed", claim: Claim{}, tree: waiting},
		{name: "a Holding condition without a record, from an earlier version", claim: Claim{Holding: true}, tree: waiting,
			reason: ReasonNotReserved, why: "keeps no record of the hold"},
		{name: "a record of an expiry keeps the gang waiting maxHold after it",
			claim: Claim{Record: &Record{Key: "rack", Domain: "r1", Since: t0.Add(-20 * time.Minute), Expired: t0.Add(-5 * time.Minute)}}, tree: waiting,
			cool: hold - 5*time.Minute},
		{name: "a record of an expiry in the future counts from now",
			claim: Claim{Record: &Record{Key: "rack", Domain: "r1", Since: t0, Expired: t0.Add(24 * time.Hour)}}, tree: waiting, cool: hold},
		{name: "a record without a key", claim: Claim{Record: rec("", "r1", -time.Minute)}, tree: waiting, reason: ReasonNotReserved, why: "names no hold"},
		{name: "a record without a domain", claim: Claim{Record: rec("rack", "", -time.Minute)}, tree: waiting, reason: ReasonNotReserved, why: "names no hold"},
		{name: "a record without a start", claim: Claim{Record: &Record{Key: "rack", Domain: "r1"}}, tree: waiting, reason: ReasonNotReserved, why: "names no hold"},
		{name: "the group is gone", claim: Claim{Record: rec("rack", "r1", -time.Minute)}},
		{name: "a child group", claim: Claim{Record: rec("rack", "r1", -time.Minute)}, tree: child,
			reason: ReasonNotReserved, why: "holds are made for the root group CompositePodGroup ns/team"},
		{name: "nothing pending", claim: Claim{Record: rec("rack", "r1", -time.Minute)}, tree: tree("big", "rack", t0.Add(-time.Hour), false),
			reason: ReasonNotReserved, why: "no member of the gang is pending"},
		{name: "a key that is no topology key of the gang", claim: Claim{Record: rec("zone", "z", -time.Minute)}, tree: waiting,
			reason: ReasonNotReserved, why: "zone is not a topology key of the gang"},
		{name: "an annotation that says never", claim: Claim{Record: rec("rack", "r1", -time.Minute)}, tree: waiting, after: -1,
			reason: ReasonNotReserved, why: "annotation says never to reserve for it"},
		{name: "a gang that has not waited its threshold", claim: Claim{Record: rec("rack", "r1", -time.Minute)}, tree: waiting, after: 2 * time.Hour,
			reason: ReasonNotReserved, why: "the gang has waited 1h0m0s of the 2h0m0s before a hold"},
		{name: "a hold past its maximum", claim: Claim{Record: rec("rack", "r1", -1000*time.Second)}, tree: waiting,
			reason: ReasonExpired, why: "rack=r1 reached the maximum hold of 15m0s at 2026-03-01T11:58:20Z; no new hold before 2026-03-01T12:13:20Z",
			cool: hold - 100*time.Second},
		{name: "a hold that ended more than maxHold ago", claim: Claim{Record: rec("rack", "r1", -24*time.Hour)}, tree: waiting,
			reason: ReasonExpired, why: "rack=r1 reached the maximum hold of 15m0s at 2026-02-28T12:15:00Z", cool: -24*time.Hour + 2*hold},
		{name: "a domain no node is in", claim: Claim{Record: rec("rack", "r9", -time.Minute)}, tree: waiting,
			reason: ReasonNotReserved, why: "no node has rack=r9"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.claim.Root = key("big")
			v := Check(c.claim, Facts{Tree: c.tree, After: c.after, Nodes: racks()}, args, t0)
			assert.Equal(t, c.reason, v.Reason, v.Why)
			assert.Contains(t, v.Why, c.why)
			assert.Equal(t, c.hold, v.Hold != nil)
			if c.cool != 0 {
				assert.Equal(t, t0.Add(c.cool), v.CoolUntil)
			} else {
				assert.True(t, v.CoolUntil.IsZero(), "cools until %v", v.CoolUntil)
			}
			if c.reason == ReasonExpired {
				require.NotNil(t, v.Record, "the expiry is kept in the group's status")
				assert.False(t, v.Record.Expired.IsZero())
			} else {
				assert.Nil(t, v.Record)
			}
		})
	}
}

// TestCheckedHold: a restored hold keeps its record's start (to the
// second), or starts now when the record claims a later one; its rank
// comes from the pods' priority and the group's creation, never from the
// record.
func TestCheckedHold(t *testing.T) {
	args := Args{AfterSeconds: 60, MaxHoldSeconds: 900, MaxSharePercent: 50}
	created := t0.Add(-time.Hour)
	tr := tree("big", "rack", created, true, true)
	never := corev1.PreemptNever
	for _, m := range tr.Members {
		m.Pod.Spec.PreemptionPolicy = &never
	}
	for _, c := range []struct {
		since, want time.Time
	}{
		{t0.Add(-time.Minute - 300*time.Millisecond), t0.Add(-61 * time.Second)},
		{t0.Add(365 * 24 * time.Hour), t0},
	} {
		v := Check(Claim{Root: key("big"), Record: &Record{Key: "rack", Domain: "r1", Since: c.since}},
			Facts{Tree: tr, Nodes: racks()}, args, t0)
		require.NotNil(t, v.Hold, v.Why)
		assert.Equal(t, c.want, v.Hold.Since)
		assert.Equal(t, Gang{Root: key("big"), Priority: 5, Preempts: false, Created: created.UnixNano()}, v.Hold.Gang)
		assert.Equal(t, sets.New("r1-a", "r1-b"), v.Hold.Nodes)
		assert.Equal(t, sets.New("big-0", "big-1"), v.Hold.Members)
	}
}

// TestRestore: restored holds, highest-ranked first, stay disjoint and
// within the share; the others are told why.
func TestRestore(t *testing.T) {
	held := func(name string, prio int32, created int64, domain string, nodes ...string) Verdict {
		h := cand(name, prio, created)
		h.Domain, h.Nodes = domain, sets.New(nodes...)
		return Verdict{Root: key(name), Hold: &h}
	}
	b := NewBook()
	told := b.Restore([]Verdict{
		held("young", 0, 3, "r0", "r0-a", "r0-b"),
		held("old", 0, 1, "r0", "r0-a", "r0-b"),
		held("vip", 9, 5, "r1", "r1-a", "r1-b"),
		held("late", 0, 4, "r2", "r2-a", "r2-b"),
		{Root: key("forged"), Reason: ReasonNotReserved, Why: "no node has rack=r9"},
		{Root: key("cooled"), CoolUntil: t0.Add(time.Hour)},
	}, 4)
	got := map[string]string{}
	for _, h := range b.List() {
		got[h.Root.Name] = h.Domain
	}
	assert.Equal(t, map[string]string{"vip": "r1", "old": "r0"}, got)
	reasons := map[string]string{}
	for _, v := range told {
		reasons[v.Root.Name] = v.Reason + ": " + v.Why
	}
	assert.Equal(t, map[string]string{
		"forged": ReasonNotReserved + ": no node has rack=r9",
		"young":  ReasonRestoreOverlap + ": rack=r0 overlaps the reservation of PodGroup ns/old",
		"late":   ReasonNotReserved + ": rack=r2 (2 nodes) would exceed the reservable share (4 nodes)",
	}, reasons)
	due, at := b.Due(key("cooled"), true, t0.Add(-time.Hour), 0, t0)
	assert.False(t, due)
	assert.Equal(t, t0.Add(time.Hour), at)
	for _, h := range b.List() {
		assert.True(t, h.Expected.IsZero(), "a restored hold's expected start is unknown until its next plan")
	}
}

// TestWaitedSince: a gang waits from the later of its root's creation and
// its oldest pending member's.
func TestWaitedSince(t *testing.T) {
	tr := tree("big", "rack", t0, true, true)
	tr.Members[0].Pod.CreationTimestamp = metav1.NewTime(t0.Add(-time.Hour))
	tr.Members[1].Pod.CreationTimestamp = metav1.NewTime(t0.Add(time.Minute))
	since, rep, ok := WaitedSince(tr)
	require.True(t, ok)
	assert.True(t, t0.Equal(since), "the root was created after its oldest member: %v", since)
	assert.Equal(t, "big-0", rep.Name)
	tr.Created = t0.Add(-2 * time.Hour).UnixNano()
	since, _, _ = WaitedSince(tr)
	assert.True(t, t0.Add(-time.Hour).Equal(since), "the oldest pending member: %v", since)
	_, _, ok = WaitedSince(tree("done", "rack", t0, false))
	assert.False(t, ok, "nothing pending")
}

// TestTopologyKeys: the keys a gang may hold a domain of are its groups'
// required and preferred keys and its pending members' required
// pod-affinity keys.
func TestTopologyKeys(t *testing.T) {
	root := tree("team", "zone", t0)
	child := tree("big", "", t0, true, false)
	child.PreferredKeys = []string{"rack"}
	aff := &corev1.Affinity{PodAffinity: &corev1.PodAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{TopologyKey: "host"}}}}
	child.Members[0].Pod.Spec.Affinity = aff
	child.Members[1].Pod.Spec.Affinity = &corev1.Affinity{PodAffinity: &corev1.PodAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{TopologyKey: "bound-only"}}}}
	root.Children = []*groups.Tree{child}
	assert.Equal(t, sets.New("zone", "rack", "host"), topologyKeys(root))
	assert.Equal(t, sets.New("big-0", "big-1"), Members(root))
}
