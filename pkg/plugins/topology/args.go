package topology

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/runtime"

	v1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
	"github.com/phalanx-sched/phalanx/pkg/placement"
	"github.com/phalanx-sched/phalanx/pkg/plugins/pluginrt"
	"github.com/phalanx-sched/phalanx/pkg/reservation"
)

// The plugin's configuration: its args as a KubeSchedulerConfiguration
// gives them, defaulted and validated into the planner's options. Apart from
// the plugin so the accepted values read in one place.

// pluginArgs configure the plugin.
//
//	pluginConfig:
//	- name: PhalanxTopology
//	  args:
//	    domainPolicy: BestFit     # BestFit | WorstFit | FirstFit
//	    planTTLSeconds: 30
//	    rankLevels: [topology.kubernetes.io/zone, topology.phalanx.dev/rack]
type pluginArgs struct {
	// DomainPolicy picks among feasible domains. BestFit (default) takes the
	// one left fullest, which keeps big domains whole for big gangs.
	DomainPolicy string `json:"domainPolicy,omitempty"`
	// PlanTTLSeconds bounds how long a plan is trusted. Default 30.
	PlanTTLSeconds int64 `json:"planTTLSeconds,omitempty"`
	// Reservation holds a domain for a gang that waited too long, with
	// backfill (pkg/reservation). Absent: off.
	Reservation *reservation.Args `json:"reservation,omitempty"`
	// RankLevels are the node label keys by which ranked members are laid
	// out on their planned nodes: consecutive ranks share one domain of
	// each level (and one node) before the next domain, domains in order
	// of their values. The group's own topology keys are always levels.
	// Default defaultRankLevels; the order given does not matter.
	RankLevels []string `json:"rankLevels,omitempty"`
}

// defaultRankLevels are the hierarchy levels rank order follows when the
// args name none: the well-known region and zone labels and the block and
// rack labels the Phalanx samples and sandbox use.
var defaultRankLevels = []string{
	"topology.kubernetes.io/region",
	"topology.kubernetes.io/zone",
	"topology.phalanx.dev/block",
	"topology.phalanx.dev/rack",
}

// ValidateArgs checks obj as the plugin reads its args when the scheduler
// starts, for a configuration checked before it runs.
func ValidateArgs(obj runtime.Object) error {
	_, _, err := decodeArgs(obj)
	return err
}

// decodeArgs reads and validates the args, applying defaults.
func decodeArgs(obj runtime.Object) (pluginArgs, placement.Options, error) {
	args := pluginArgs{}
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
	if args.RankLevels == nil {
		args.RankLevels = defaultRankLevels
	}
	for _, k := range args.RankLevels {
		if errs := v1alpha1.ValidateTopologyKey(k); len(errs) > 0 {
			return args, opts, fmt.Errorf("%s args: rankLevels: %q: %s", Name, k, strings.Join(errs, "; "))
		}
	}
	opts.RankLevels = args.RankLevels
	if args.Reservation != nil {
		if err := args.Reservation.Default(); err != nil {
			return args, opts, fmt.Errorf("%s args: %w", Name, err)
		}
	}
	return args, opts, nil
}
