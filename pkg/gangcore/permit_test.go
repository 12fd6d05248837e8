package gangcore

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/phalanx-sched/phalanx/pkg/groups"
)

func pod(name string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID(name)}}
}

var leaf = groups.Key{Kind: groups.PodGroupKind, Namespace: "ns", Name: "g"}

// TestPermit covers the user guide's Permit rules for gangs: no member
// binds until minCount (or minGroupCount) can run at once; the member that
// completes the gang lets every waiting member through whose own chain has
// its minimum; a member reserved on a node deleted meanwhile fails the
// attempt; the wait follows the profile's bounds or the group's own
// scheduleTimeoutSeconds, cut to the framework's 900 s.
func TestPermit(t *testing.T) {
	limit := 600 * time.Second
	short := groups.Shortfall{Key: leaf, Leaf: true, Have: 2, Need: 4}
	tests := []struct {
		name string
		in   PermitInput
		want Decision
	}{{
		name: "a pod in no group has quorum and goes ahead alone",
		in:   PermitInput{Facts: groups.PermitFacts{Quorum: true}},
		want: Decision{Verdict: Allow},
	}, {
		name: "a chain that cannot be counted is refused for good",
		in:   PermitInput{Facts: groups.PermitFacts{Err: errors.New("PodGroup ns/g not found")}},
		want: Decision{Verdict: Reject, Unresolvable: true, Message: "PodGroup ns/g not found"},
	}, {
		name: "below minCount the first member waits, pulls its siblings forward and opens a round",
		in:   PermitInput{Facts: groups.PermitFacts{Short: short, Tracked: true, Root: leaf, Assumed: 1}, Limit: limit},
		want: Decision{Verdict: Wait, Message: "waiting for pods: 2/4 present", Timeout: limit, Round: true, Assembling: true},
	}, {
		name: "a later member waits in the same round without pulling again",
		in:   PermitInput{Facts: groups.PermitFacts{Short: short, Tracked: true, Root: leaf, Assumed: 3}, Limit: limit},
		want: Decision{Verdict: Wait, Message: "waiting for pods: 2/4 present", Timeout: limit, Round: true},
	}, {
		name: "a composite short of minGroupCount says so",
		in: PermitInput{Facts: groups.PermitFacts{Short: groups.Shortfall{Key: leaf, Have: 1, Need: 2}, Tracked: true, Root: leaf, Assumed: 2},
			Limit: limit},
		want: Decision{Verdict: Wait, Message: "waiting for child groups: 1/2 have their minimum pods", Timeout: limit, Round: true},
	}, {
		name: "a group's own wait longer than the profile's bound is the framework's timeout",
		in:   PermitInput{Facts: groups.PermitFacts{Short: short, Tracked: true, Root: leaf, Assumed: 2, WaitTimeout: 700 * time.Second}, Limit: limit},
		want: Decision{Verdict: Wait, Message: "waiting for pods: 2/4 present", Timeout: 700 * time.Second, Round: true, OwnWait: 700 * time.Second},
	}, {
		name: "no wait exceeds the framework's 900 s",
		in:   PermitInput{Facts: groups.PermitFacts{Short: short, Tracked: true, Root: leaf, Assumed: 2, WaitTimeout: time.Hour}, Limit: limit},
		want: Decision{Verdict: Wait, Message: "waiting for pods: 2/4 present", Timeout: 900 * time.Second, Round: true, OwnWait: time.Hour},
	}, {
		name: "a member the cache no longer knows waits without a round",
		in:   PermitInput{Facts: groups.PermitFacts{Short: short, WaitTimeout: time.Hour}, Limit: limit},
		want: Decision{Verdict: Wait, Message: "waiting for pods: 2/4 present", Timeout: limit},
	}, {
		name: "quorum lets through every waiting member whose chain has its minimum",
		in: PermitInput{Facts: groups.PermitFacts{Quorum: true, Tracked: true, Root: leaf}, Pod: pod("m-3"), Node: "n3",
			Waiting: []Waiter{{Pod: pod("m-0"), Node: "n0", Quorum: true}, {Pod: pod("other-child-0"), Node: "n1"}, {Pod: pod("m-1"), Node: "n1", Quorum: true}}},
		want: Decision{Verdict: Allow, Release: []Waiter{{Pod: pod("m-0"), Node: "n0", Quorum: true}, {Pod: pod("m-1"), Node: "n1", Quorum: true}}},
	}, {
		name: "the member's own node deleted fails the attempt, to retry",
		in:   PermitInput{Facts: groups.PermitFacts{Quorum: true}, Pod: pod("m-3"), Node: "n3", NodeGone: true},
		want: Decision{Verdict: Reject, Message: "node n3 of member ns/m-3 was deleted; the gang retries as a unit"},
	}, {
		name: "a waiter's node deleted fails the attempt, naming the first such waiter by name",
		in: PermitInput{Facts: groups.PermitFacts{Quorum: true}, Pod: pod("m-3"), Node: "n3",
			Waiting: []Waiter{{Pod: pod("m-2"), Node: "n2", NodeGone: true, Quorum: true}, {Pod: pod("m-0"), Node: "n0"}, {Pod: pod("m-1"), Node: "n1", NodeGone: true}}},
		want: Decision{Verdict: Reject, Message: "node n1 of member ns/m-1 was deleted; the gang retries as a unit"},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, Permit(tc.in))
		})
	}
}

func TestWaitingEvent(t *testing.T) {
	tests := []struct {
		name              string
		idle, limit, own  time.Duration
		wantDelay         time.Duration
		wantBoundsMessage string
	}{
		{"the profile's bounds, told after a second", 60 * time.Second, 600 * time.Second, 0, time.Second, "released after 1m0s without one, or 10m0s in all"},
		{"a short timeout is told sooner", 5 * time.Second, 600 * time.Second, 0, 500 * time.Millisecond, "released after 5s without one, or 10m0s in all"},
		{"a group's own wait", 60 * time.Second, 600 * time.Second, 2 * time.Second, 200 * time.Millisecond, "released after 2s in all, its PodGroup's scheduleTimeoutSeconds"},
		{"a group's own wait is cut to 900 s", 60 * time.Second, 600 * time.Second, time.Hour, time.Second, "released after 15m0s in all, its PodGroup's scheduleTimeoutSeconds"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			delay, bounds := WaitingEvent(tc.idle, tc.limit, tc.own)
			assert.Equal(t, tc.wantDelay, delay)
			assert.Equal(t, tc.wantBoundsMessage, bounds)
		})
	}
}
