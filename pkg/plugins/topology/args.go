package topology

import (
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"

	"github.com/phalanx-sched/phalanx/pkg/placement"
	"github.com/phalanx-sched/phalanx/pkg/plugins/pluginrt"
	"github.com/phalanx-sched/phalanx/pkg/reservation"
)

// The plugin's configuration: its args as a KubeSchedulerConfiguration
// gives them, defaulted and validated into the planner's options. Apart from
// the plugin so the accepted values read in one place.

// Args configure the plugin.
//
//	pluginConfig:
//	- name: PhalanxTopology
//	  args:
//	    domainPolicy: BestFit     # BestFit | WorstFit | FirstFit
//	    planTTLSeconds: 30
type Args struct {
	// DomainPolicy picks among feasible domains. BestFit (default) takes the
	// one left fullest, which keeps big domains whole for big gangs.
	DomainPolicy string `json:"domainPolicy,omitempty"`
	// PlanTTLSeconds bounds how long a plan is trusted. Default 30.
	PlanTTLSeconds int64 `json:"planTTLSeconds,omitempty"`
	// Reservation holds a domain for a gang that waited too long, with
	// backfill (pkg/reservation). Absent: off.
	Reservation *reservation.Args `json:"reservation,omitempty"`
}

// DecodeArgs reads and validates the args, applying defaults.
func DecodeArgs(obj runtime.Object) (Args, placement.Options, error) {
	args := Args{}
	if obj != nil {
		if err := pluginrt.DecodeArgs(obj, &args); err != nil {
			return args, placement.Options{}, fmt.Errorf("decode %s args: %w", Name, err)
		}
	}
	opts := placement.Options{}
	switch args.DomainPolicy {
	case "", "BestFit":
		args.DomainPolicy, opts.DomainPolicy = "BestFit", placement.BestFit
	case "WorstFit":
		opts.DomainPolicy = placement.WorstFit
	case "FirstFit":
		opts.DomainPolicy = placement.FirstFit
	default:
		return args, opts, fmt.Errorf("%s args: domainPolicy %q is not supported: use BestFit, WorstFit or FirstFit", Name, args.DomainPolicy)
	}
	if args.PlanTTLSeconds == 0 {
		args.PlanTTLSeconds = 30
	}
	if args.PlanTTLSeconds < 1 || args.PlanTTLSeconds > 600 {
		return args, opts, fmt.Errorf("%s args: planTTLSeconds=%d is out of range: use 1 to 600", Name, args.PlanTTLSeconds)
	}
	if args.Reservation != nil {
		if err := args.Reservation.Default(); err != nil {
			return args, opts, fmt.Errorf("%s args: %w", Name, err)
		}
	}
	return args, opts, nil
}
