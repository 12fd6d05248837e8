package sandbox

import (
	"errors"
	"fmt"
	"os"

	"k8s.io/klog/v2"
	"k8s.io/kubernetes/cmd/kube-scheduler/app/options"
	schedvalidation "k8s.io/kubernetes/pkg/scheduler/apis/config/validation"

	"github.com/phalanx-sched/phalanx/pkg/plugins"
)

// LoadSchedulerConfig reads the KubeSchedulerConfiguration at path and
// checks it as phalanx-scheduler --config would before scheduling
// anything: kube-scheduler's own loader (strict: a field it does not know
// is refused), kube-scheduler's validation, then the args of the Phalanx
// plugins. Every error names its field path in the file. The bytes it
// returns are for Options.SchedulerConfig, which adapts the connection
// and leader election to the sandbox and keeps the rest as written.
func LoadSchedulerConfig(path string) ([]byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	cfg, err := options.LoadConfigFromFile(klog.Background(), path)
	if err != nil {
		return nil, fmt.Errorf("scheduler configuration %s: %w", path, err)
	}
	var invalid []error
	if err := schedvalidation.ValidateKubeSchedulerConfiguration(cfg); err != nil {
		invalid = append(invalid, err)
	}
	if errs := plugins.ValidateArgs(cfg); len(errs) > 0 {
		invalid = append(invalid, errs.ToAggregate())
	}
	if len(invalid) > 0 {
		return nil, fmt.Errorf("scheduler configuration %s is not valid: %w", path, errors.Join(invalid...))
	}
	return data, nil
}
