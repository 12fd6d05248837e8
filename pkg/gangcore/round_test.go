package gangcore

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// TestRound: a round expires when no member arrived for its idle bound,
// or at its overall limit however steadily members arrive; a group's own
// wait (scheduleTimeoutSeconds) is exactly that long in all.
func TestRound(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	tests := []struct {
		name             string
		idle, limit, own time.Duration
		arrivals         []int // seconds after t0, after the first
		check            int
		wantAgain        time.Duration
		wantExpired      string
	}{{
		name: "open within the idle bound", idle: 60 * time.Second, limit: 600 * time.Second,
		check: 30, wantAgain: 30 * time.Second,
	}, {
		name: "arrivals push the idle bound", idle: 60 * time.Second, limit: 600 * time.Second,
		arrivals: []int{50, 100}, check: 120, wantAgain: 40 * time.Second,
	}, {
		name: "stalled: no member for the idle bound", idle: 60 * time.Second, limit: 600 * time.Second,
		arrivals: []int{10}, check: 70,
		wantExpired: "no member of the gang reached Permit for 1m0s (permitWaitingTimeSeconds) after 2 had arrived; the gang retries as a unit",
	}, {
		name: "progressing steadily, released at the overall limit", idle: 60 * time.Second, limit: 120 * time.Second,
		arrivals: []int{50, 100}, check: 120,
		wantExpired: "the gang waited 2m0s in Permit in all (maxPermitWaitingTimeSeconds) without reaching its minimum; 3 members had arrived",
	}, {
		name: "the idle bound never exceeds the limit", idle: 600 * time.Second, limit: 60 * time.Second,
		check: 30, wantAgain: 30 * time.Second,
	}, {
		name: "a group's own wait ignores arrivals", idle: 60 * time.Second, limit: 600 * time.Second, own: 10 * time.Second,
		arrivals: []int{9}, check: 10,
		wantExpired: "the gang waited 10s in Permit (its PodGroup's scheduleTimeoutSeconds) without reaching its minimum; 2 members had arrived; the gang retries as a unit",
	}, {
		name: "a group's own wait is cut to 900 s", idle: 60 * time.Second, limit: 600 * time.Second, own: time.Hour,
		check: 800, wantAgain: 100 * time.Second,
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := NewRound(t0, tc.idle, tc.limit, tc.own)
			for _, s := range tc.arrivals {
				r.Arrive(at(s))
			}
			again, expired := r.Check(at(tc.check))
			assert.Equal(t, tc.wantExpired, expired)
			if tc.wantExpired == "" {
				assert.Equal(t, tc.wantAgain, again)
			}
		})
	}
}
