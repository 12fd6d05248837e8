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
// Go module cache at the version this binary was built against (or, for a
// test binary, which carries no dependency versions, the version the
// module in the working directory requires), so the sandbox serves exactly
// the API the dialect's types describe. The module is in the cache
// wherever this binary was built from source.
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
	var paths []string
	crdPath := filepath.Join("manifests", "coscheduling", "crd.yaml")
	if version != "" {
		for _, dir := range moduleCaches() {
			paths = append(paths, filepath.Join(dir, filepath.FromSlash(schedulerPluginsModule)+"@"+version, crdPath))
		}
	}
	// Test binaries carry no dependency versions: the go command names
	// the module's directory for the module the working directory is in.
	if b, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", schedulerPluginsModule).Output(); err == nil {
		if dir := strings.TrimSpace(string(b)); dir != "" {
			paths = append(paths, filepath.Join(dir, crdPath))
		}
	}
	var tried []string
	for _, path := range paths {
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
	return nil, fmt.Errorf("scheduler-plugins' PodGroup CRD not found (tried %s): run `go mod download %s` in the Phalanx module", strings.Join(tried, ", "), schedulerPluginsModule)
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
