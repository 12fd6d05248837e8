package main

import (
	"fmt"
	"os"

	restclient "k8s.io/client-go/rest"
	xversioned "sigs.k8s.io/scheduler-plugins/pkg/generated/clientset/versioned"

	"github.com/phalanx-sched/phalanx/tools/sandbox"
)

// schedulerPluginsCRDAvailable reports whether the sandbox can serve
// scheduler-plugins' PodGroups (their CRD is embedded; decoding it fails
// only in a broken build). Without it the sandbox still starts; scenarios
// and samples of that dialect then fail with a message saying so.
func schedulerPluginsCRDAvailable() bool {
	if _, err := sandbox.SchedulerPluginsCRD(); err != nil {
		fmt.Fprintf(os.Stderr, "Note: scheduling.x-k8s.io PodGroups are not served: %v\n", err)
		return false
	}
	return true
}

// schedulerPluginsClient is a client for scheduler-plugins' PodGroups of
// the sandbox, nil when it does not serve them.
func schedulerPluginsClient(c *sandbox.Cluster) xversioned.Interface {
	if _, err := c.Client.Discovery().ServerResourcesForGroupVersion("scheduling.x-k8s.io/v1alpha1"); err != nil {
		return nil
	}
	cfg := restclient.CopyConfig(c.Config)
	cfg.ContentType, cfg.AcceptContentTypes = "application/json", "application/json"
	x, err := xversioned.NewForConfig(cfg)
	if err != nil {
		return nil
	}
	return x
}
