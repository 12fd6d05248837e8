package sim

import (
	"github.com/phalanx-sched/phalanx/config"
)

// apply returns base, a KubeSchedulerConfiguration (empty:
// config/second-scheduler.yaml, what the sandbox runs), with the spec's
// reservation block in the PhalanxTopology args of every profile. Unset
// fields are left out, so the plugin's defaults apply.
func (s *SchedulerSpec) apply(base []byte) ([]byte, error) {
	if len(base) == 0 {
		base = config.SecondScheduler
	}
	resv := map[string]any{"afterSeconds": s.Reservation.AfterSeconds}
	if s.Reservation.MaxHoldSeconds > 0 {
		resv["maxHoldSeconds"] = s.Reservation.MaxHoldSeconds
	}
	if s.Reservation.MaxSharePercent > 0 {
		resv["maxSharePercent"] = s.Reservation.MaxSharePercent
	}
	if s.Reservation.Backfill != nil {
		resv["backfill"] = *s.Reservation.Backfill
	}
	return config.WithPluginArg(base, "PhalanxTopology", "reservation", resv)
}
