package sandbox

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/util/yaml"
	restclient "k8s.io/client-go/rest"
)

// schedulerPluginsModule is the module whose PodGroup CRD the sandbox
// installs for the scheduling.x-k8s.io dialect, at the version this binary
// was built with.
const schedulerPluginsModule = "sigs.k8s.io/scheduler-plugins"

// SchedulerPluginsCRD returns the scheduling.x-k8s.io PodGroup CRD that
// scheduler-plugins ships (manifests/coscheduling/crd.yaml), read from the
// Go module cache at the version this binary was built against, so the
// sandbox serves exactly the API the dialect's types describe. The module
// is in the cache wherever this binary was built from source.
func SchedulerPluginsCRD() (*apiextensionsv1.CustomResourceDefinition, error) {
	version := ""
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, dep := range info.Deps {
			if dep.Path == schedulerPluginsModule {
				version = dep.Version
				if dep.Replace != nil {
					version = dep.Replace.Version
				}
			}
		}
	}
	if version == "" {
		return nil, fmt.Errorf("%s is not part of this build", schedulerPluginsModule)
	}
	rel := filepath.Join(filepath.FromSlash(schedulerPluginsModule)+"@"+version, "manifests", "coscheduling", "crd.yaml")
	var tried []string
	for _, dir := range moduleCaches() {
		path := filepath.Join(dir, rel)
		data, err := os.ReadFile(path)
		if err != nil {
			tried = append(tried, path)
			continue
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.Unmarshal(bytes.TrimPrefix(bytes.TrimSpace(data), []byte("---")), crd); err != nil {
			return nil, fmt.Errorf("decode %s: %w", path, err)
		}
		return crd, nil
	}
	return nil, fmt.Errorf("scheduler-plugins' PodGroup CRD not found (tried %s): run `go mod download %s`", strings.Join(tried, ", "), schedulerPluginsModule)
}

// moduleCaches lists where the Go module cache may be: GOMODCACHE as the
// go command reports it, then the environment's defaults.
func moduleCaches() []string {
	var out []string
	if b, err := exec.Command("go", "env", "GOMODCACHE").Output(); err == nil {
		if dir := strings.TrimSpace(string(b)); dir != "" {
			out = append(out, dir)
		}
	}
	if dir := os.Getenv("GOMODCACHE"); dir != "" {
		out = append(out, dir)
	}
	if gopath := os.Getenv("GOPATH"); gopath != "" {
		out = append(out, filepath.Join(strings.Split(gopath, string(os.PathListSeparator))[0], "pkg", "mod"))
	}
	if home, err := os.UserHomeDir(); err == nil {
		out = append(out, filepath.Join(home, "go", "pkg", "mod"))
	}
	return out
}

// InstallSchedulerPluginsCRD creates scheduler-plugins' PodGroup CRD (kept
// if it exists) and waits until it is served.
func InstallSchedulerPluginsCRD(ctx context.Context, cfg *restclient.Config) error {
	crd, err := SchedulerPluginsCRD()
	if err != nil {
		return err
	}
	if crd.Name == "" {
		return errors.New("scheduler-plugins' PodGroup CRD has no name")
	}
	return installCRDObjects(ctx, cfg, []*apiextensionsv1.CustomResourceDefinition{crd})
}
