// Package version is what phalanx-scheduler and phalanx-controller report
// with --version. make build and make image set Version and Commit with
// -ldflags "-X github.com/phalanx-sched/phalanx/pkg/version.Version=..."; a
// plain go build reports dev and the commit Go recorded, if any.
package version

import (
	"fmt"
	"runtime"
	"runtime/debug"
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
			if m.Path == "k8s.io/kubernetes" {
				kube = m.Version
				if m.Replace != nil {
					kube = m.Replace.Version
				}
			}
		}
	}
	if commit == "" {
		commit = "unknown"
	}
	return fmt.Sprintf("%s %s (commit %s, Kubernetes %s, %s)", binary, Version, commit, kube, runtime.Version())
}
