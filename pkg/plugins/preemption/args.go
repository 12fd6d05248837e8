package preemption

import (
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/runtime"

	"github.com/phalanx-sched/phalanx/pkg/plugins/pluginrt"
)

// defaultMaxMinRuntimeSeconds caps the minimum runtime a group, pod or
// PriorityClass may ask for. A group's author may be any namespace editor,
// and protection holds back pods of higher priority from every tenant: an
// hour is longer than the usual checkpoint interval of a training job
// (what protection exists to save is the work since the last checkpoint),
// yet short enough that another tenant's urgent gang is never kept out for
// long.
const defaultMaxMinRuntimeSeconds = 3600

// pluginArgs are the plugin's arguments in a KubeSchedulerConfiguration:
//
//	pluginConfig:
//	- name: PhalanxPreemption
//	  args:
//	    minRuntimeSeconds: 0
//	    maxMinRuntimeSeconds: 3600
type pluginArgs struct {
	// MinRuntimeSeconds is the profile's minimum runtime: how long a
	// running pod or gang that declares none (and whose PriorityClass
	// declares none) is protected from preemption. Default 0, none.
	MinRuntimeSeconds int64 `json:"minRuntimeSeconds,omitempty"`
	// MaxMinRuntimeSeconds caps every declared minimum runtime: a group's
	// field or annotation, a pod's annotation, a PriorityClass's
	// annotation. Between 0 and 604800 (a week) and not below
	// minRuntimeSeconds. Default 3600 (defaultMaxMinRuntimeSeconds).
	MaxMinRuntimeSeconds *int64 `json:"maxMinRuntimeSeconds,omitempty"`
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
	if args.MaxMinRuntimeSeconds == nil {
		v := max(int64(defaultMaxMinRuntimeSeconds), args.MinRuntimeSeconds)
		args.MaxMinRuntimeSeconds = &v
	}
	const week = 7 * 24 * 3600
	if m := *args.MaxMinRuntimeSeconds; m < 0 || m > week {
		return args, fmt.Errorf("%s args: maxMinRuntimeSeconds=%d is out of range: use 0 to %d", Name, m, week)
	}
	if args.MinRuntimeSeconds < 0 || args.MinRuntimeSeconds > *args.MaxMinRuntimeSeconds {
		return args, fmt.Errorf("%s args: minRuntimeSeconds=%d is out of range: use 0 to maxMinRuntimeSeconds (%d)", Name, args.MinRuntimeSeconds, *args.MaxMinRuntimeSeconds)
	}
	return args, nil
}

// runtimePolicy is the profile's side of minimum runtimes.
type runtimePolicy struct {
	byDefault, cap time.Duration
}

func (a pluginArgs) runtimePolicy() runtimePolicy {
	return runtimePolicy{byDefault: time.Duration(a.MinRuntimeSeconds) * time.Second, cap: time.Duration(*a.MaxMinRuntimeSeconds) * time.Second}
}
