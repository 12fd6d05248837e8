package inspect

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/phalanx-sched/phalanx/pkg/debugapi"
)

func TestClassifyFollowsTheOrderMembersMeetTheChecks(t *testing.T) {
	ready := facts{unit: "pods", existingOK: true, min: 4, pending: 4, placedNeed: 4}
	with := func(mut func(*facts)) facts {
		f := ready
		mut(&f)
		return f
	}
	cases := []struct {
		name  string
		f     facts
		stage string
		msg   string
		plan  bool
	}{
		{"an invalid group says why, whatever else holds", with(func(f *facts) { f.invalid = "pod w-3 has priority 0, the group 1000"; f.boundOK = true }),
			debugapi.StageInvalid, "pod w-3 has priority 0, the group 1000", false},
		{"too few members", with(func(f *facts) { f.existingOK = false; f.waiting = "waiting for pods: 3/4 present" }),
			debugapi.StageWaitingForPods, "waiting for pods: 3/4 present", false},
		{"members in Permit", with(func(f *facts) { f.inPermit, f.placed, f.assumed, f.pending = 3, 3, 3, 1 }),
			debugapi.StageWaitingInPermit, "3 members reserved and waiting in Permit for the rest of the gang: 3/4 pods placed", false},
		{"reserved, none waiting: binding", with(func(f *facts) { f.placed, f.assumed, f.pending = 4, 4, 0 }),
			debugapi.StageBinding, "the gang passed Permit: 4 members being bound", false},
		{"victims still terminating", with(func(f *facts) { f.evicted, f.evictionLeft = 8, 2 }),
			debugapi.StagePreempting, "preempted 8 pods for the group; waiting for 2 of them to terminate", false},
		{"victims gone: planned again", with(func(f *facts) { f.evicted = 8 }), "", "", true},
		{"the minimum bound", with(func(f *facts) { f.boundOK, f.bound, f.pending = true, 4, 0 }),
			debugapi.StageScheduled, "the group's minimum is bound: 4/4 pods", false},
		{"the minimum bound, extras pending: assessed for them", with(func(f *facts) { f.boundOK, f.bound, f.pending = true, 4, 2 }),
			debugapi.StageScheduled, "the group's minimum is bound: 4/4 pods; 2 more members pending", true},
		{"pending, nothing else: assessed", ready, "", "", true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			stage, msg, plan := classify(c.f)
			assert.Equal(t, c.stage, stage)
			assert.Equal(t, c.msg, msg)
			assert.Equal(t, c.plan, plan)
		})
	}
}

func TestAssessedStages(t *testing.T) {
	stage, msg := assessed(&debugapi.Assessment{Fits: true})
	assert.Equal(t, debugapi.StageQueued, stage)
	assert.Equal(t, "fits now: the scheduler places it on its next attempt", msg)

	_, msg = assessed(&debugapi.Assessment{Fits: true, Preemption: &debugapi.Preemption{Possible: true, Victims: make([]debugapi.Victim, 1)}})
	assert.Equal(t, "fits now: the scheduler places it on its next attempt, and the members beyond its minimum then preempt 1 pods", msg)

	stage, msg = assessed(&debugapi.Assessment{Blocked: "needs 8 pods of 4 cpu"})
	assert.Equal(t, debugapi.StageInfeasible, stage)
	assert.Equal(t, "needs 8 pods of 4 cpu", msg)

	inf := &debugapi.Infeasible{Reason: "only 2 of 3 pods fit"}
	_, msg = assessed(&debugapi.Assessment{Infeasible: inf, Preemption: &debugapi.Preemption{Possible: true, Victims: make([]debugapi.Victim, 2)}})
	assert.Equal(t, "only 2 of 3 pods fit; preempting 2 pods would make it fit, which the scheduler does on its next attempt", msg)
	_, msg = assessed(&debugapi.Assessment{Infeasible: inf, Preemption: &debugapi.Preemption{Reason: "the group's preemptionPolicy is Never"}})
	assert.Equal(t, "only 2 of 3 pods fit; no preemption: the group's preemptionPolicy is Never", msg)
}

func TestParseKind(t *testing.T) {
	for in, want := range map[string]string{
		"pod": "pod", "pods": "pod", "po": "pod",
		"podgroup": "podgroup", "PodGroups": "podgroup", "ppg": "podgroup", "pg": "podgroup",
		"compositepodgroups": "compositepodgroup", "pcpg": "compositepodgroup",
		"workload": "workload", "pwl": "workload",
	} {
		got, err := parseKind(in)
		assert.NoError(t, err, in)
		assert.Equal(t, want, got.kind, in)
	}
	got, err := parseKind("podgroups.scheduling.k8s.io")
	assert.NoError(t, err)
	if assert.NotNil(t, got.dialect) {
		assert.Equal(t, "scheduling.k8s.io", got.dialect.String())
	}
	got, err = parseKind("ppg")
	assert.NoError(t, err)
	if assert.NotNil(t, got.dialect) {
		assert.Equal(t, "scheduling.phalanx.dev", got.dialect.String(), "Phalanx's short names mean its own API")
	}
	for _, bad := range []string{"deployment", "podgroups.example.com", "pods.scheduling.k8s.io", "workloads.scheduling.k8s.io"} {
		_, err := parseKind(bad)
		assert.Error(t, err, bad)
	}
}
