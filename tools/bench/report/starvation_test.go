package report

import (
	"bytes"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestComputeStarvation(t *testing.T) {
	begin := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(s float64) time.Time { return begin.Add(time.Duration(s * float64(time.Second))) }
	end := at(60)
	// A cluster of 8 cpu for 60 s: 480 cpu-seconds.
	small := func(created, bound float64, runtime time.Duration, done bool) StarvationPod {
		p := StarvationPod{CPU: 4, Created: at(created), Runtime: runtime, Done: done}
		if bound >= 0 {
			p.Bound = at(bound)
		}
		return p
	}
	gang := func(bound float64) StarvationPod {
		p := StarvationPod{Gang: true, CPU: 4, Created: at(5), Runtime: 20 * time.Second}
		if bound >= 0 {
			p.Bound = at(bound)
		}
		return p
	}
	pods := []StarvationPod{
		small(0, 1, 10*time.Second, true),    // waits 1 s, 40 cpu-s
		small(2, 5, 10*time.Second, true),    // waits 3 s, 40 cpu-s
		small(50, 55, 10*time.Second, false), // waits 5 s, cut at the window: 20 cpu-s
		small(58, -1, 10*time.Second, false), // never bound
		gang(15), gang(17),                   // 2 × 80 cpu-s; the last bound 12 s after the gang's creation
	}

	s := ComputeStarvation(pods, begin, end, at(5), 8)
	assert.Equal(t, 60.0, s.WindowSeconds)
	assert.InDelta(t, 12, s.GangStartSeconds, 1e-9, "creation at 5 s to the last member's bind at 17 s")
	assert.Equal(t, 4, s.SmallCreated)
	assert.Equal(t, 3, s.SmallStarted)
	assert.Equal(t, 2, s.SmallDone)
	assert.Equal(t, 1, s.SmallPending)
	assert.InDelta(t, 2, s.SmallDonePerMinute, 1e-9, "2 done in one minute")
	assert.InDelta(t, 3, s.MeanWaitSeconds, 1e-9, "(1 + 3 + 5) / 3")
	assert.InDelta(t, (40+40+20+160)/480.0, s.Utilisation, 1e-9)

	t.Run("a gang with a member unbound never started", func(t *testing.T) {
		s := ComputeStarvation([]StarvationPod{gang(15), gang(-1)}, begin, end, at(5), 8)
		assert.Equal(t, -1.0, s.GangStartSeconds)
		assert.InDelta(t, 80/480.0, s.Utilisation, 1e-9, "the bound member still ran")
	})
	t.Run("a bind seen after the window does not count", func(t *testing.T) {
		s := ComputeStarvation([]StarvationPod{small(50, 61, time.Second, false)}, begin, end, at(5), 8)
		assert.Equal(t, 0, s.SmallStarted)
		assert.Equal(t, 1, s.SmallPending)
		assert.Zero(t, s.Utilisation)
	})

	t.Run("the table says never and shows every arm", func(t *testing.T) {
		never := s
		never.GangStartSeconds = -1
		var out bytes.Buffer
		err := WriteTable(&out, []Result{
			{Case: "Starvation/8Nodes_ReservationOn", Arm: ArmPhalanxProcess, Run: 1, Starvation: &s},
			{Case: "Starvation/8Nodes_ReservationOff", Arm: ArmUpstream, Run: 1, Starvation: &never},
			{Case: "Starvation/8Nodes_ReservationOn", Arm: ArmUpstream, Run: 1, Skipped: "reservation is a Phalanx argument"},
		})
		assert.NoError(t, err)
		text := out.String()
		assert.Contains(t, text, "Starvation (one gang")
		assert.Contains(t, text, "12.0s")
		assert.Contains(t, text, "never (in the window)")
		assert.Contains(t, text, "2 of 4")
		assert.Contains(t, text, "54%")
		assert.Contains(t, text, "n/a: reservation is a Phalanx argument")
	})
}
