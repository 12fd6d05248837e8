package bench

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestStarvationCases(t *testing.T) {
	cases, err := SelectCases(Cases(false), []string{"starvation"})
	require.NoError(t, err)
	_, err = SelectCases(Cases(true), []string{"starvation"})
	assert.Error(t, err, "not in the quick set, whose test wants every pod bound")
	require.Len(t, cases, 3, "reservation off, on without backfill, on with backfill")
	off, on := cases[0], cases[2]
	assert.Nil(t, off.Starvation.Reservation)
	assert.Equal(t, true, on.Starvation.Reservation["backfill"])
	assert.Equal(t, false, cases[1].Starvation.Reservation["backfill"])

	t.Run("every arm sees the same seeded schedule, about the rate asked", func(t *testing.T) {
		plan := off.Starvation.arrivals()
		assert.Equal(t, plan, on.Starvation.arrivals())
		long := *off.Starvation
		long.Window = time.Hour
		n := len(long.arrivals())
		assert.InDelta(t, 0.85*3600, n, 0.05*0.85*3600)
		for _, a := range plan {
			assert.Less(t, a.at, off.Starvation.Window)
			assert.GreaterOrEqual(t, a.runtime, off.Starvation.MinRuntime)
			assert.LessOrEqual(t, a.runtime, off.Starvation.MaxRuntime)
		}
	})
	t.Run("baselines run the reservation-off case only", func(t *testing.T) {
		assert.Empty(t, starvationSkip(off, ArmUpstream))
		assert.Contains(t, starvationSkip(on, ArmUpstream), "reservation is a Phalanx argument")
		assert.Empty(t, starvationSkip(on, ArmPhalanxProcess))
		assert.NotEmpty(t, starvationSkip(off, ArmCeiling))
		assert.NotEmpty(t, starvationSkip(off, ArmSchedulerPlugins), "the gang needs a rack")
	})
	t.Run("Phalanx arms get the case's reservation args on the deployed profile", func(t *testing.T) {
		cfg, err := phalanxConfigFor(on, phalanxConfig())
		require.NoError(t, err)
		assert.Contains(t, string(cfg), "reservation:")
		assert.Contains(t, string(cfg), "afterSeconds: 5")
		assert.Contains(t, string(cfg), "domainPolicy: BestFit")
		same, err := phalanxConfigFor(off, phalanxConfig())
		require.NoError(t, err)
		assert.False(t, strings.Contains(string(same), "reservation:"))
	})
	t.Run("harness options replace the window, seed and rate", func(t *testing.T) {
		h := &Harness{opts: Options{StarvationWindow: 10 * time.Second, StarvationSeed: 2, StarvationRate: 0.5}}
		c := h.withStarvationOptions(off)
		assert.Equal(t, 10*time.Second, c.Starvation.Window)
		assert.Equal(t, int64(2), c.Starvation.Seed)
		assert.Equal(t, 0.5, c.Starvation.Rate)
		assert.Equal(t, DefaultStarvationWindow, off.Starvation.Window, "the case itself is unchanged")
	})
}
