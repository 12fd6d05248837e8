// Package version is what phalanx-scheduler and phalanx-controller report
// with --version. make build and make image set Version and Commit with
// -ldflags "-X github.com/phalanx-sched/phalanx/pkg/version.Version=..."; a
// plain go build reports dev and the commit Go recorded, if any.
package version

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"
)

var (
	// Version is the release (a git describe of the commit).
	Version = "dev"
	// Commit is the full git commit the binary was built from.
	Commit = ""
)

// String is the one-line answer to --version: the binary, its version and
// commit, and the Kubernetes libraries and Go it was built with (the
// scheduler is kube-scheduler of that Kubernetes release).
func String(binary string) string {
	commit := Commit
	kube := "unknown"
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, s := range info.Settings {
			if s.Key == "vcs.revision" && commit == "" {
				commit = s.Value
			}
		}
		for _, m := range info.Deps {
			v := m.Version
			if m.Replace != nil {
				v = m.Replace.Version
			}
			switch {
			case m.Path == "k8s.io/kubernetes":
				kube = v
			// The controller links client-go but not k8s.io/kubernetes;
			// client-go v0.N.M is Kubernetes v1.N.M.
			case m.Path == "k8s.io/client-go" && kube == "unknown" && strings.HasPrefix(v, "v0."):
				kube = "v1." + strings.TrimPrefix(v, "v0.")
			}
		}
	}
	if commit == "" {
		commit = "unknown"
	}
	return fmt.Sprintf("%s %s (commit %s, Kubernetes %s, %s)", binary, Version, commit, kube, runtime.Version())
}
