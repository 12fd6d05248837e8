package gang

import (
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
)

// DefaultPermitWaitingTimeSeconds bounds how long reserved members wait in
// Permit for the rest of their gang before all of them are released.
const DefaultPermitWaitingTimeSeconds = 60

// DefaultBindConcurrency is how many binding requests the scheduler has in
// flight at once by default.
const DefaultBindConcurrency = 64

// Args are the plugin's arguments in a KubeSchedulerConfiguration:
//
//	pluginConfig:
//	- name: PhalanxGang
//	  args:
//	    permitWaitingTimeSeconds: 60
//	    bindConcurrency: 64
type Args struct {
	// PermitWaitingTimeSeconds is how long members wait in Permit for
	// quorum. Must be between 1 and 3600. Default 60.
	PermitWaitingTimeSeconds int64 `json:"permitWaitingTimeSeconds,omitempty"`
	// BindConcurrency caps the binding requests in flight at once when
	// PhalanxGang is listed before DefaultBinder at the bind extension
	// point. Must be between 1 and 10000. Default 64.
	BindConcurrency int32 `json:"bindConcurrency,omitempty"`
}

// DecodeArgs reads and validates the plugin args, applying defaults.
func DecodeArgs(obj runtime.Object) (Args, error) {
	args := Args{}
	if obj != nil {
		if err := frameworkruntime.DecodeInto(obj, &args); err != nil {
			return args, fmt.Errorf("decode %s args: %w", Name, err)
		}
	}
	if args.PermitWaitingTimeSeconds == 0 {
		args.PermitWaitingTimeSeconds = DefaultPermitWaitingTimeSeconds
	}
	if args.PermitWaitingTimeSeconds < 1 || args.PermitWaitingTimeSeconds > 3600 {
		return args, fmt.Errorf("%s args: permitWaitingTimeSeconds=%d is out of range: use 1 to 3600", Name, args.PermitWaitingTimeSeconds)
	}
	if args.BindConcurrency == 0 {
		args.BindConcurrency = DefaultBindConcurrency
	}
	if args.BindConcurrency < 1 || args.BindConcurrency > 10000 {
		return args, fmt.Errorf("%s args: bindConcurrency=%d is out of range: use 1 to 10000", Name, args.BindConcurrency)
	}
	return args, nil
}

func (a Args) permitTimeout() time.Duration {
	return time.Duration(a.PermitWaitingTimeSeconds) * time.Second
}
