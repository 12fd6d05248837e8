package gang

import (
	"github.com/phalanx-sched/phalanx/pkg/gangcore"
	"github.com/phalanx-sched/phalanx/pkg/plugins/pluginrt"

	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
)

// defaultPermitWaitingTimeSeconds bounds how long reserved members wait in
// Permit for the rest of their gang before all of them are released.
const defaultPermitWaitingTimeSeconds = 60

// defaultMaxPermitWaitingTimeSeconds bounds how long a gang that keeps
// assembling may hold its reservations in Permit in all.
const defaultMaxPermitWaitingTimeSeconds = 600

// defaultBindConcurrency is how many binding requests the scheduler has in
// flight at once by default.
const defaultBindConcurrency = 64

// pluginArgs are the plugin's arguments in a KubeSchedulerConfiguration:
//
//	pluginConfig:
//	- name: PhalanxGang
//	  args:
//	    permitWaitingTimeSeconds: 60
//	    maxPermitWaitingTimeSeconds: 600
//	    bindConcurrency: 64
//	    memberScheduledEvents: false
type pluginArgs struct {
	// PermitWaitingTimeSeconds is how long the reserved members of a gang
	// wait in Permit without another member arriving there before all of
	// them are released. Must be between 1 and 3600. Default 60.
	PermitWaitingTimeSeconds int64 `json:"permitWaitingTimeSeconds,omitempty"`
	// MaxPermitWaitingTimeSeconds bounds how long a gang's members wait in
	// Permit in all, however steadily the gang progresses. Must be between
	// 1 and 900 (the framework's own limit) and not below
	// permitWaitingTimeSeconds. Default 600, or permitWaitingTimeSeconds
	// when that is longer (at most 900).
	MaxPermitWaitingTimeSeconds int64 `json:"maxPermitWaitingTimeSeconds,omitempty"`
	// BindConcurrency caps the binding requests in flight at once when
	// PhalanxGang is listed before DefaultBinder at the bind extension
	// point. Must be between 1 and 10000. Default 64.
	BindConcurrency int32 `json:"bindConcurrency,omitempty"`
	// MemberScheduledEvents keeps the framework's Scheduled event on every
	// bound member of a gang that has a group object. Off by default: the
	// group's conditions already say the gang is scheduled, the pod's node
	// and PodScheduled condition say where each member went, and the event
	// would be a second API write per member beside its binding. Members
	// of label gangs, which have no object, and pods outside gangs keep
	// their event either way.
	MemberScheduledEvents bool `json:"memberScheduledEvents,omitempty"`
}

// ValidateArgs checks obj as the plugin reads its args when the scheduler
// starts, for a configuration checked before it runs.
func ValidateArgs(obj runtime.Object) error {
	_, err := decodeArgs(obj)
	return err
}

// decodeArgs reads and validates the plugin args, applying defaults.
func decodeArgs(obj runtime.Object) (pluginArgs, error) {
	args := pluginArgs{}
	if obj != nil {
		if err := pluginrt.DecodeArgs(obj, &args); err != nil {
			return args, fmt.Errorf("decode %s args: %w", Name, err)
		}
	}
	if args.PermitWaitingTimeSeconds == 0 {
		args.PermitWaitingTimeSeconds = defaultPermitWaitingTimeSeconds
	}
	if args.PermitWaitingTimeSeconds < 1 || args.PermitWaitingTimeSeconds > 3600 {
		return args, fmt.Errorf("%s args: permitWaitingTimeSeconds=%d is out of range: use 1 to 3600", Name, args.PermitWaitingTimeSeconds)
	}
	if args.MaxPermitWaitingTimeSeconds == 0 {
		args.MaxPermitWaitingTimeSeconds = min(max(defaultMaxPermitWaitingTimeSeconds, args.PermitWaitingTimeSeconds), gangcore.FrameworkMaxPermitSeconds)
	}
	if args.MaxPermitWaitingTimeSeconds < 1 || args.MaxPermitWaitingTimeSeconds > gangcore.FrameworkMaxPermitSeconds {
		return args, fmt.Errorf("%s args: maxPermitWaitingTimeSeconds=%d is out of range: use 1 to %d", Name, args.MaxPermitWaitingTimeSeconds, gangcore.FrameworkMaxPermitSeconds)
	}
	if args.MaxPermitWaitingTimeSeconds < min(args.PermitWaitingTimeSeconds, gangcore.FrameworkMaxPermitSeconds) {
		return args, fmt.Errorf("%s args: maxPermitWaitingTimeSeconds=%d is below permitWaitingTimeSeconds=%d: the overall bound must allow at least one idle period", Name, args.MaxPermitWaitingTimeSeconds, args.PermitWaitingTimeSeconds)
	}
	if args.BindConcurrency == 0 {
		args.BindConcurrency = defaultBindConcurrency
	}
	if args.BindConcurrency < 1 || args.BindConcurrency > 10000 {
		return args, fmt.Errorf("%s args: bindConcurrency=%d is out of range: use 1 to 10000", Name, args.BindConcurrency)
	}
	return args, nil
}

// permitTimeout is how long a gang may wait without progress.
func (a pluginArgs) permitTimeout() time.Duration {
	return min(time.Duration(a.PermitWaitingTimeSeconds), time.Duration(a.MaxPermitWaitingTimeSeconds)) * time.Second
}

// permitLimit is how long a gang may wait in all; it is also the timeout
// Permit gives the framework, so the framework's per-pod timer never
// fires before the gang's own deadline.
func (a pluginArgs) permitLimit() time.Duration {
	return time.Duration(a.MaxPermitWaitingTimeSeconds) * time.Second
}
